"""Request limits in Ray Serve's HTTP proxy, ahead of the applications.

Serve's proxy reads a client's body into a queue of its own as fast as the client sends it,
whatever the application does (``proxy_asgi_receive`` in ray/serve/_private/proxy.py, Ray
2.60): a chunked 133 MB body sent at loopback speed grew the proxy by 50 MB before the ingress's
413 (``read_body`` in deploy/asgi.py) could stop it. :class:`ProxyLimits` wraps the proxy's ASGI
app (installed by :mod:`omniplane.deploy.proxy_auth`): a ``Content-Length`` over the limit gets
HTTP 413 before anything reaches the proxy; a body's bytes are counted as the proxy reads them,
and the request is answered 413 as soon as they pass the limit, or 408 when the body is not all
in within the body timeout; either way the proxy is told the client left (so it stops reading
and cancels the request) and the connection closes. :func:`watch_connections` closes the
proxy's connections that send no request (half-sent headers, slowloris) and caps a request's
headers, as ``route`` does (:mod:`omniplane.deploy.conn_watch`). No Ray here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

from omniplane.deploy.auth import Guard, Refused, body_timeout
from omniplane.deploy.conn_watch import bounded_head, close_idle

Message = MutableMapping[str, Any]


async def answer(send: Any, exc: Refused, close: bool = False) -> None:
    """``exc`` as a JSON answer; ``close``: the connection ends after it (``Connection: close``)."""
    body = json.dumps(exc.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *((k.lower().encode(), v.encode()) for k, v in exc.headers.items())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ProxyLimits:
    """ASGI middleware: the body limit and body timeout of ``guard`` on every HTTP request."""

    def __init__(self, app: Any, max_body_bytes: int, body_timeout_s: float) -> None:
        self.app = app
        self.guard = Guard(max_body_bytes=max_body_bytes, body_timeout_s=body_timeout_s)

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        try:
            self.guard.check_length(length.decode("latin-1") if length is not None else None)
        except Refused as exc:
            await answer(send, exc, close=True)
            return
        guard = self.guard
        end = asyncio.get_running_loop().time() + guard.body_timeout_s
        size = 0
        body_done = started = taken = False

        async def limited_receive() -> Message:
            nonlocal size, body_done, taken
            if taken:
                return {"type": "http.disconnect"}
            if body_done:
                msg: Message = await receive()
                return msg
            try:
                async with asyncio.timeout_at(end):
                    msg = await receive()
            except TimeoutError:
                refusal = body_timeout(guard.body_timeout_s)
            else:
                if msg["type"] != "http.request":
                    return msg
                size += len(msg.get("body", b""))
                body_done = not msg.get("more_body", False)
                try:
                    guard.check_body(size)
                    return msg
                except Refused as exc:
                    refusal = exc
            taken = True  # the application's answer, if any comes, is dropped from here on
            if not started:
                await answer(send, refusal, close=True)
            return {"type": "http.disconnect"}  # the proxy stops reading and cancels the request

        async def guarded_send(msg: Message) -> None:
            nonlocal started
            if taken:
                return
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        await self.app(scope, limited_receive, guarded_send)


def watch_connections(idle_s: float) -> None:
    """From now on, every uvicorn server this process starts closes its connections that have no
    request in progress for ``idle_s`` (:func:`omniplane.deploy.conn_watch.close_idle`) and
    answers a request whose line and headers pass 64 KiB with 431
    (:func:`omniplane.deploy.conn_watch.bounded_head`). Ray Serve's proxy runs one uvicorn server
    per process and has neither of its own."""
    import uvicorn

    if getattr(uvicorn.Server.startup, "watches_connections", False):
        return
    startup = uvicorn.Server.startup

    async def watched(self: Any, sockets: Any = None) -> None:
        self.config.http_protocol_class = bounded_head(self.config.http_protocol_class)
        await startup(self, sockets=sockets)
        self.omniplane_idle_watch = asyncio.ensure_future(
            close_idle(lambda: self.server_state.connections, idle_s))

    watched.watches_connections = True  # type: ignore[attr-defined]
    uvicorn.Server.startup = watched  # type: ignore[method-assign]
