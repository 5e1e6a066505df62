"""Reading a request on Starlette (no Ray): the body within the guard's limits, and work that
stops when its client disconnects. Used by the Serve ingress (``serve_app``) and the router
(``gateway``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

from omniplane.deploy.auth import Guard, body_timeout

T = TypeVar("T")


async def read_body(request: Request, guard: Guard) -> bytes:
    """The request body, refused (413) once it passes the guard's limit: by its declared length
    before anything is read, else as soon as the bytes read pass it (the rest is never read);
    a body not all in within ``guard.body_timeout_s`` (stalled, or trickled a byte at a time) is
    refused with 408. Under Ray Serve,
    the proxy reads the client's body into a queue of its own while this runs
    (``proxy_asgi_receive`` in ray/serve/_private/proxy.py): ``deploy`` caps what it reads with
    the same limits in the proxy itself (:mod:`omniplane.deploy.proxy_limits`)."""
    guard.check_length(request.headers.get("content-length"))
    chunks: list[bytes] = []
    size = 0
    parts = request.stream().__aiter__()
    end = asyncio.get_running_loop().time() + guard.body_timeout_s
    while True:
        try:
            async with asyncio.timeout_at(end):
                chunk = await anext(parts)
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise body_timeout(guard.body_timeout_s) from None
        size += len(chunk)
        guard.check_body(size)
        chunks.append(chunk)
    return b"".join(chunks)


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T | None:
    """``work``'s result, or None (``work`` cancelled) when the client disconnects first. Call it
    once the body is read: the next ASGI message is then the disconnect."""

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    job, watch = asyncio.ensure_future(work), asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait((job, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (job, watch):
            if not t.done():
                t.cancel()
    if job.cancelled() or not job.done():
        return None
    return job.result()
