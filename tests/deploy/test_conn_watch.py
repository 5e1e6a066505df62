"""uvicorn's httptools protocol with a cap on a request's line and headers
(omniplane.deploy.conn_watch.bounded_head), on a real uvicorn server on 127.0.0.1: header lines
without end get 431 and the connection closes; bodies, keep-alive and ordinary requests pass."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from omniplane.deploy.conn_watch import MAX_HEAD_BYTES, bounded_head

pytest.importorskip("httptools")


async def echo_size(scope: Any, receive: Any, send: Any) -> None:
    size, more = 0, True
    while more:
        msg = await receive()
        size += len(msg.get("body", b""))
        more = msg.get("more_body", False)
    body = str(size).encode()
    headers = [(b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(params=[True, False], ids=["bounded", "uvicorn"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[tuple[str, int], bool]]:
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    bounded = request.param
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    proto = bounded_head(HttpToolsProtocol) if bounded else HttpToolsProtocol
    srv = uvicorn.Server(uvicorn.Config(echo_size, http=proto, lifespan="off", log_level="critical"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(100):
        if srv.started:
            break
        threading.Event().wait(0.1)
    yield sock.getsockname(), bounded
    srv.should_exit = True
    thread.join(10)


Server = tuple[tuple[str, int], bool]


def test_header_lines_without_end_get_431_and_the_connection_closes(server: Server) -> None:
    address, bounded = server
    s = socket.create_connection(address, timeout=5)
    s.sendall(b"POST / HTTP/1.1\r\nhost: x\r\n")
    sent = 0
    line = b"x-a: " + b"a" * 1000 + b"\r\n"
    try:
        while sent < 64 * MAX_HEAD_BYTES and not select.select([s], [], [], 0)[0]:  # 4 MiB at most
            s.sendall(line * 64)
            sent += 64 * len(line)
    except OSError:
        pass
    try:
        answer = s.recv(200)
    except OSError:  # uvicorn alone: still reading headers, no answer (a timeout here)
        answer = b""
    s.close()
    if bounded:
        assert answer.startswith(b"HTTP/1.1 431") and sent < 64 * MAX_HEAD_BYTES, (answer, sent)
    else:  # what bounded_head is for: uvicorn takes all 4 MiB of headers and says nothing
        assert answer == b"" and sent >= 64 * MAX_HEAD_BYTES


def test_large_bodies_and_keep_alive_requests_pass(server: Server) -> None:
    address, _ = server
    with socket.create_connection(address, timeout=10) as s:
        big = b"a" * (4 * MAX_HEAD_BYTES)
        for body in (big, b"", big):  # one connection, three requests: the body is not a header
            s.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            got = b""
            while not got.endswith(b"\r\n\r\n" + str(len(body)).encode()):
                chunk = s.recv(4096)
                assert chunk, got
                got += chunk
            assert got.startswith(b"HTTP/1.1 200"), got
