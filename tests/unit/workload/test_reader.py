"""workload/reader.py over a real loopback socket: lines come with the time their bytes arrived (the
kernel's stamp), not the time a busy client got round to reading them."""
from __future__ import annotations

import socket
import sys
import threading
import time

import gevent.socket
import pytest
from geventhttpclient.response import HTTPSocketResponse

from lookahead_runner.workload.reader import ArrivalReader

HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def serve(script) -> tuple[int, list[float]]:
    """A one-connection server thread: `script(conn, sent)` writes the response, appending send times."""
    listener = socket.create_server(("127.0.0.1", 0))
    sent: list[float] = []

    def run():
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(HEADERS)
            script(conn, sent)
        listener.close()

    threading.Thread(target=run, daemon=True).start()
    return listener.getsockname()[1], sent


def open_response(port: int, timeout: float | None = None) -> HTTPSocketResponse:
    sock = gevent.socket.create_connection(("127.0.0.1", port))
    sock.settimeout(timeout)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    return HTTPSocketResponse(sock, method="POST")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")
def test_a_line_read_late_still_carries_the_time_it_arrived():
    def script(conn, sent):
        time.sleep(0.05)
        sent.append(time.time())
        conn.sendall(chunk(b'data: {"n":1}\n\n'))
        time.sleep(0.05)
        sent.append(time.time())
        conn.sendall(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    port, sent = serve(script)
    reader = ArrivalReader(open_response(port))
    assert reader.read_lines() == [b'data: {"n":1}', b""]
    first = reader.arrived_s
    time.sleep(0.3)  # the client is busy (this blocks the whole process, as a loaded event loop would)
    read_at = time.time()
    assert reader.read_lines() == [b"data: [DONE]", b""]
    assert 0 <= first - sent[0] < 0.02
    assert 0 <= reader.arrived_s - sent[1] < 0.02, "stamped when read, not when it arrived"
    assert read_at - reader.arrived_s > 0.2
    assert reader.read_lines() is None


def test_events_split_and_batched_across_reads():
    def script(conn, sent):
        conn.sendall(chunk(b"data: a\n\ndata: b\n\ndata: c"))  # two events and half of a third in one read
        time.sleep(0.1)
        sent.append(time.time())
        conn.sendall(chunk(b"c\n\n") + chunk(b"tail-without-newline") + b"0\r\n\r\n")

    port, sent = serve(script)
    response = open_response(port, timeout=7.0)
    sock = response._sock
    reader = ArrivalReader(response)
    assert reader.read_lines() == [b"data: a", b"", b"data: b", b""]
    assert sock.gettimeout() is None  # no timer per read: the caller bounds the whole stream
    batch_time = reader.arrived_s
    assert reader.read_lines() == [b"data: cc", b""]
    assert reader.arrived_s >= sent[0] > batch_time  # the completing read's time, not the first half's
    assert reader.read_lines() == [b"tail-without-newline"]
    assert reader.read_lines() is None
    assert sock.gettimeout() == 7.0  # the pooled connection's own timeout is back


def test_a_connection_closed_mid_body_raises():
    def script(conn, sent):
        conn.sendall(chunk(b"data: a\n\n") + b"40\r\npartial")

    port, _ = serve(script)
    reader = ArrivalReader(open_response(port))
    assert reader.read_lines() == [b"data: a", b""]
    with pytest.raises(Exception):
        for _ in range(10):
            reader.read_lines()


def test_a_pooled_connections_liveness_check_does_not_yield_before_the_send():
    """Importing the user (which imports Locust, which monkey-patches select) must leave
    geventhttpclient's pre-request check non-yielding: a request goes out when its send time is taken."""
    import gevent
    from geventhttpclient.connectionpool import ConnectionPool

    import lookahead_runner.workload.user  # noqa: F401  (patches the pool's select)

    listener = socket.create_server(("127.0.0.1", 0))
    sock = gevent.socket.create_connection(listener.getsockname())
    ran = []
    gevent.spawn(ran.append, "other greenlet")
    try:
        assert ConnectionPool._is_socket_alive(None, sock) is True
        assert ran == [], "the check switched to another greenlet"
        gevent.sleep(0)
        assert ran == ["other greenlet"]
    finally:
        sock.close()
        listener.close()
