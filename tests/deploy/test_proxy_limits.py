"""The body limit and body timeout in Ray Serve's proxy (omniplane.deploy.proxy_limits): an app
that, like Serve's proxy, reads the client's body into a queue of its own as fast as it comes
(``proxy_asgi_receive``) reads no more than the limit and one message past it; the client gets
413 (or 408) at once and its connection closes; idle connections of the proxy's uvicorn close.
No Ray."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any

import pytest

from omniplane.deploy.auth import Guard
from omniplane.deploy.proxy_auth import LIMITS_ENV, ProxyKeys, install, middlewares
from omniplane.deploy.proxy_limits import ProxyLimits, watch_connections

LIMIT = 1 << 20
CHUNK = 1 << 16


class Greedy:
    """Stands for Serve's proxy app: reads every message until a disconnect (counting the body
    bytes it got), answers 200 only once the body is complete."""

    def __init__(self) -> None:
        self.read = 0
        self.disconnected = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                self.disconnected = True
                break
            self.read += len(msg.get("body", b""))
            if not msg.get("more_body", False):
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": b"ok"})
                return


class Client:
    """A client's side of one request: ``chunks`` body messages of CHUNK bytes (then it stalls if
    ``stall``), recording what the server sent and how many messages it took."""

    def __init__(self, chunks: int, stall: bool = False, headers: list[tuple[bytes, bytes]] | None = None):
        self.left, self.stall, self.taken = chunks, stall, 0
        self.sent: list[dict[str, Any]] = []
        self.scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions",
                      "headers": headers or [(b"transfer-encoding", b"chunked")]}

    async def receive(self) -> dict[str, Any]:
        if self.left == 0:
            if self.stall:
                await asyncio.sleep(3600)
            return {"type": "http.disconnect"}
        self.left -= 1
        self.taken += 1
        return {"type": "http.request", "body": b"a" * CHUNK, "more_body": self.left > 0 or self.stall}

    async def send(self, msg: dict[str, Any]) -> None:
        self.sent.append(msg)

    def status(self) -> int | None:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        assert len(starts) <= 1, starts  # answered once
        return starts[0]["status"] if starts else None

    def closes(self) -> bool:
        return (b"connection", b"close") in self.sent[0]["headers"]


def run(app: Any, client: Client) -> None:
    asyncio.run(asyncio.wait_for(app(client.scope, client.receive, client.send), 10))


def test_a_chunked_body_past_the_limit_gets_413_and_the_proxy_stops_reading() -> None:
    inner, client = Greedy(), Client(chunks=2128)  # 133 MiB
    run(ProxyLimits(inner, LIMIT, 30.0), client)
    assert client.status() == 413 and client.closes()
    assert json.loads(client.sent[1]["body"])["error"]["type"] == "request_too_large"
    assert inner.disconnected and inner.read <= LIMIT  # the message past the limit never reached it
    assert client.taken == LIMIT // CHUNK + 1  # nothing read after the one that passed the limit


def test_without_the_middleware_the_proxy_reads_the_whole_body() -> None:
    inner, client = Greedy(), Client(chunks=2128)
    run(inner, client)
    assert inner.read == 2128 * CHUNK  # what ProxyLimits stops


def test_a_declared_length_over_the_limit_gets_413_before_the_proxy_runs() -> None:
    inner = Greedy()
    client = Client(chunks=10, headers=[(b"content-length", str(133 * 2**20).encode())])
    run(ProxyLimits(inner, LIMIT, 30.0), client)
    assert client.status() == 413 and client.closes() and client.taken == 0 and inner.read == 0


def test_a_stalled_body_gets_408_at_the_body_timeout() -> None:
    inner, client = Greedy(), Client(chunks=2, stall=True)
    run(ProxyLimits(inner, LIMIT, 0.2), client)
    assert client.status() == 408 and client.closes() and inner.disconnected


def test_a_body_within_the_limit_passes_unchanged() -> None:
    inner, client = Greedy(), Client(chunks=LIMIT // CHUNK)
    run(ProxyLimits(inner, LIMIT, 30.0), client)
    assert client.status() == 200 and inner.read == LIMIT and client.sent[1]["body"] == b"ok"


def test_an_app_that_answered_first_keeps_its_answer_and_the_rest_is_not_read() -> None:
    async def refuses(scope: Any, receive: Any, send: Any) -> None:  # a 401 before the body
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"no"})
        while (await receive())["type"] != "http.disconnect":
            pass

    client = Client(chunks=2128)
    run(ProxyLimits(refuses, LIMIT, 30.0), client)
    assert client.status() == 401 and client.taken == LIMIT // CHUNK + 1


def test_install_and_the_callback_put_the_limits_in_front_of_every_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "startup", uvicorn.Server.startup)  # watch_connections patches it
    env: dict[str, str] = {}
    install(Guard(max_body_bytes=LIMIT, body_timeout_s=5.0), env, idle_s=2.0)  # no keys: limits still
    monkeypatch.setenv(LIMITS_ENV, env[LIMITS_ENV])
    for k in ("OMNIPLANE_PROXY_KEY_DIGESTS",):
        monkeypatch.delenv(k, raising=False)
    (mw,) = middlewares()
    assert mw.cls is ProxyLimits and mw.kwargs == {"max_body_bytes": LIMIT, "body_timeout_s": 5.0}
    monkeypatch.setenv("OMNIPLANE_PROXY_KEY_DIGESTS", ",".join(Guard.with_keys(["k"]).key_digests))
    assert [m.cls for m in middlewares()] == [ProxyKeys, ProxyLimits]


def test_watch_connections_closes_half_sent_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "startup", uvicorn.Server.startup)
    watch_connections(0.5)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="critical"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(100):
            if server.started:
                break
            threading.Event().wait(0.1)
        half = socket.create_connection(sock.getsockname(), timeout=10)
        half.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        assert half.recv(100) == b""  # closed by the server (a timeout here if it held it)
        half.close()
    finally:
        server.should_exit = True
        thread.join(10)
