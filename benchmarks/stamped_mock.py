"""The mock vLLM server of benchmarks/client_accuracy.py: /v1/completions streamed on a fixed schedule,
every content chunk carrying its true send time and the request's arrival time.

    python benchmarks/stamped_mock.py --itl-file FILE [--port 0]     # prints "LISTENING <port>"

First token FIRST_TOKEN_MS after the request arrived, then one token every ITL ms (read from
--itl-file, so a driver can change it between runs; 0: as fast as it can), one token per chunk,
usage on every chunk. A content chunk starts ``data: {"t_sent":...,"t_arrival":...,`` (read back by
`read_stamps`). The arrival is the kernel's receive stamp of the request (SO_TIMESTAMPNS) and the
schedule starts from it, so the mock's own lateness in reading a request is not counted against a
client; GET /stats returns (and resets) that lateness and the chunks' send lateness, p50/p99 in ms. GET
/arrivals returns (and resets) every completion request's arrival stamp: when requests reached the server
(benchmarks/dispatch_accuracy.py tests their spacing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import time
from pathlib import Path

from lookahead_runner.workload.timeline import percentile

MODEL = "mock-model"
FIRST_TOKEN_MS = 50.0
OUTPUT_TOKENS = 128
PROMPT_TOKENS = 32
STAMP_PREFIX = b'data: {"t_sent":'
STAMP_CHARS = 17  # unix seconds with 6 decimals, 10 integer digits
ARRIVAL_OFFSET = len(STAMP_PREFIX) + STAMP_CHARS + len(b',"t_arrival":')
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; Python does not export it


def read_stamps(line: bytes) -> tuple[float, float] | None:
    """(t_sent, t_arrival) of a content chunk, by position; None for other lines."""
    if not line.startswith(STAMP_PREFIX):
        return None
    start = len(STAMP_PREFIX)
    return float(line[start : start + STAMP_CHARS]), float(line[ARRIVAL_OFFSET : ARRIVAL_OFFSET + STAMP_CHARS])


def _chunk(request_id: int, index: int, t_arrival: float, finish: bool) -> bytes:
    reason = '"length"' if finish else "null"
    body = (f'{{"t_sent":{time.time():.6f},"t_arrival":{t_arrival:.6f},"id":"cmpl-{request_id}",'
            f'"object":"text_completion","created":{int(t_arrival)},"model":"{MODEL}","choices":[{{"index":0,'
            f'"text":" tok","logprobs":null,"finish_reason":{reason},"stop_reason":null}}],"usage":{{'
            f'"prompt_tokens":{PROMPT_TOKENS},"total_tokens":{PROMPT_TOKENS + index + 1},'
            f'"completion_tokens":{index + 1}}}}}')
    return _frame(b"data: " + body.encode() + b"\n\n")


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class StampedSocket(socket.socket):
    """A socket whose reads keep the kernel's arrival stamp of the newest packet read (SO_TIMESTAMPNS):
    the mock knows when a request reached it, however late its event loop got to it."""

    last_arrival = 0.0

    def accept(self):
        fd, address = self._accept()
        conn = StampedSocket(self.family, self.type, self.proto, fileno=fd)
        conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        return conn, address

    def recv(self, size, flags=0):
        data, ancillary, _flags, _address = self.recvmsg(size, socket.CMSG_SPACE(16), flags)
        for _level, _kind, stamp in ancillary:
            seconds, nanoseconds = struct.unpack_from("@qq", stamp)
            self.last_arrival = seconds + nanoseconds * 1e-9
        return data


# the mock's own lateness since the last /stats: chunk sends behind schedule, request reads behind arrival
_LATENESS: dict[str, list[float]] = {"send_ms": [], "read_ms": []}
_ARRIVALS: list[float] = []   # each completion request's kernel arrival stamp since the last /arrivals


async def _stream(writer: asyncio.StreamWriter, body: dict, t_arrival: float, itl_s: float, request_id: int) -> None:
    """Send the chunks from timer callbacks (no task switch per chunk), each at start + first + i * itl."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    loop = asyncio.get_running_loop()
    # the schedule starts from the request's arrival (the kernel's stamp), not from when the loop read it
    start = loop.time() - (time.time() - t_arrival) + FIRST_TOKEN_MS / 1000.0
    late = _LATENESS["send_ms"]
    tokens = int(body.get("max_tokens", OUTPUT_TOKENS))
    finished = loop.create_future()

    def send(index: int) -> None:
        if writer.is_closing():
            finished.set_result(None)
            return
        late.append((loop.time() - start - index * itl_s) * 1000.0)
        writer.write(_chunk(request_id, index, t_arrival, index == tokens - 1))
        if index + 1 < tokens:
            loop.call_at(start + (index + 1) * itl_s, send, index + 1)
        else:
            finished.set_result(None)

    loop.call_at(start, send, 0)
    await finished
    usage = (f'{{"id":"cmpl-{request_id}","object":"text_completion","choices":[],"usage":{{"prompt_tokens":'
             f'{PROMPT_TOKENS},"total_tokens":{PROMPT_TOKENS + tokens},"completion_tokens":{tokens}}}}}')
    writer.write(_frame(b"data: " + usage.encode() + b"\n\n") + _frame(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()


def _json_response(document: dict) -> bytes:
    data = json.dumps(document).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)


async def _serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, itl_s: float,
                            counter: list[int]) -> None:
    try:
        while True:
            request_line = await reader.readline()
            if not request_line:
                return
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length)) if length else {}
            read_at = time.time()
            raw = writer.get_extra_info("socket")
            t_arrival = getattr(getattr(raw, "_sock", raw), "last_arrival", 0.0) or read_at
            _LATENESS["read_ms"].append((read_at - t_arrival) * 1000.0)
            path = request_line.split(b" ")[1]
            if path == b"/v1/completions":
                counter[0] += 1
                _ARRIVALS.append(t_arrival)
                await _stream(writer, body, t_arrival, itl_s, counter[0])
            elif path == b"/v1/models":
                writer.write(_json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]}))
            elif path == b"/stats":  # the mock's lateness since the last call, then reset
                stats = {name: {"p50": pct(values, 50), "p99": pct(values, 99), "n": len(values)}
                         for name, values in _LATENESS.items()}
                for values in _LATENESS.values():
                    values.clear()
                writer.write(_json_response(stats))
            elif path == b"/arrivals":
                writer.write(_json_response({"t_arrival": list(_ARRIVALS)}))
                _ARRIVALS.clear()
            elif path == b"/tokenize":
                writer.write(_json_response({"count": len(str(body.get("prompt", "")).split())}))
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


async def _serve(port: int, itl_file: str) -> None:
    counter = [0]
    itl = {"s": 0.0}

    async def handle(reader, writer):
        await _serve_connection(reader, writer, itl["s"], counter)

    listener = StampedSocket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    server = await asyncio.start_server(handle, sock=listener, backlog=4096)
    print(f"LISTENING {server.sockets[0].getsockname()[1]}", flush=True)
    while True:  # the driver changes the token interval between runs through a file
        try:
            itl["s"] = float(Path(itl_file).read_text()) / 1000.0
        except (OSError, ValueError):
            pass
        await asyncio.sleep(0.2)


def pct(values: list[float], q: float) -> float | None:
    """The q-th percentile (as the scenario computes it), in ms rounded to the microsecond; None if empty."""
    value = percentile(values, q)
    return None if value is None else round(value, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--itl-file", required=True)
    args = parser.parse_args()
    asyncio.run(_serve(args.port, args.itl_file))


if __name__ == "__main__":
    main()
