"""A streaming response's lines, each with the time its bytes reached this host.

A reading taken when the user code gets to a line (after readline) is late by however long the
event loop was busy elsewhere: with hundreds of streams in one process, that queue is the client's
error. Here the time comes from the socket read itself: the kernel stamps every packet on arrival
(SO_TIMESTAMPNS), and `recvmsg` hands the stamp of the newest packet in the read back with the bytes,
so a line's time is when it arrived, not when it was read. Where the kernel gives no stamp (TLS, or
another OS), the time is taken right after the read instead.

All lines completed by one read share that read's stamp; the work per read is one `recvmsg`, one
feed of the HTTP parser (it undoes the chunked encoding into the response's body buffer) and one
split of the complete lines, instead of a search, copy and buffer shift per line.

Times are unix seconds (CLOCK_REALTIME, as the kernel stamps): take the send time with `time.time()`.
"""
from __future__ import annotations

import socket
import struct
import time
from typing import Any

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value; Python does not export it
_STAMP = struct.Struct("@qq")  # struct timespec: seconds, nanoseconds
_ANCILLARY_SIZE = socket.CMSG_SPACE(_STAMP.size)
BLOCK_SIZE = 64 * 1024


class ArrivalReader:
    """Reads the rest of a geventhttpclient response (headers already parsed) as lines + arrival times.

    `response` is geventhttpclient's HTTPSocketResponse (Locust's `resp.stream`); its parser keeps
    the de-chunked body in `_body_buffer`, which this reader consumes.
    """

    __slots__ = ("_response", "_sock", "_buffer", "_stamped", "_socket_timeout", "arrived_s")

    def __init__(self, response: Any) -> None:
        self._response = response
        self._sock = response._sock
        self._buffer: bytearray = response._body_buffer
        self._stamped = enable_arrival_stamps(self._sock)
        # gevent arms a timer for every wait of a socket with a timeout: one per read, a third of a read's
        # cost. The caller bounds the whole stream (gevent.Timeout), so the reads go without; the pooled
        # connection gets its timeout back when the body ends (or the read fails).
        self._socket_timeout = self._sock.gettimeout() if self._sock is not None else None
        if self._sock is not None:
            self._sock.settimeout(None)
        # body bytes that came with the headers arrived before this point; the headers' read is not ours
        self.arrived_s = time.time()

    def read_lines(self) -> list[bytes] | None:
        """The next complete lines (without their b"\\n"; blank lines kept as b""), all read by one socket
        read at `arrived_s`; None at the end of the body (a last line without b"\\n" comes before it)."""
        buffer = self._buffer
        while True:
            end = buffer.rfind(b"\n")
            if end >= 0:
                with memoryview(buffer) as view:
                    block = bytes(view[:end])
                del buffer[: end + 1]
                return block.split(b"\n")
            if self._response.message_complete or self._sock is None:
                if buffer:
                    rest = bytes(buffer)
                    del buffer[:]
                    return [rest]
                return None
            self._receive()

    def _receive(self) -> None:
        sock = self._sock
        if self._stamped:
            data, ancillary, _flags, _address = sock.recvmsg(BLOCK_SIZE, _ANCILLARY_SIZE)
            stamp = ancillary[0][2] if ancillary else None
            if stamp is not None and len(stamp) >= _STAMP.size:
                seconds, nanoseconds = _STAMP.unpack_from(stamp)
                self.arrived_s = seconds + nanoseconds * 1e-9
            else:
                self.arrived_s = time.time()
        else:
            data = sock.recv(BLOCK_SIZE)
            self.arrived_s = time.time()
        try:
            self._response.feed(data)  # b"" (the peer closed) makes the parser raise if the body is incomplete
        except BaseException:
            self.close()
            self._response.release()
            raise
        if self._response.message_complete:
            self.close()  # the parser released the connection to its pool

    def close(self) -> None:
        """Give the connection its own timeout back; reading stops here. (Also on a failed or cut stream.)"""
        if self._sock is not None:
            self._sock.settimeout(self._socket_timeout)
            self._sock = None


def enable_arrival_stamps(sock: Any) -> bool:
    """Ask the kernel to stamp this socket's incoming packets; False where it cannot (TLS, no such option)."""
    if sock is None or not hasattr(sock, "recvmsg") or "SSL" in type(sock).__name__:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True
