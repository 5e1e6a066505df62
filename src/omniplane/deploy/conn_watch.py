"""Connections that send no request: closed after ``idle_s``.

uvicorn (0.55) times a connection out only between keep-alive requests: one that sends half its
headers, nothing at all, or keeps sending a body the router already refused (413) is held for
good, one file descriptor each (slowloris). :func:`close_idle` closes every connection with no
request in progress (headers not yet complete, or its answer sent) for ``idle_s``. It reads
uvicorn's protocol objects (``cycle``, ``transport``; both HTTP implementations have them)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

IDLE_S = 10.0  # assumption: a client sends its request's headers within 10 s of connecting


async def close_idle(connections: Callable[[], Iterable[Any]], idle_s: float = IDLE_S) -> None:
    """Runs until cancelled, checking every ``idle_s / 4`` (at most each second)."""
    loop = asyncio.get_running_loop()
    since: dict[int, tuple[Any, float]] = {}  # id(connection) -> (its cycle then, idle since)
    while True:
        now = loop.time()
        live: dict[int, tuple[Any, float]] = {}
        for conn in list(connections()):
            cycle = getattr(conn, "cycle", None)
            if cycle is not None and not getattr(cycle, "response_complete", True):
                continue  # a request in progress: the body timeout and deadline bound it
            key = id(conn)
            was = since.get(key)
            live[key] = was if was is not None and was[0] is cycle else (cycle, now)
            transport = getattr(conn, "transport", None)
            if now - live[key][1] >= idle_s and transport is not None and not transport.is_closing():
                transport.close()
        since = live
        await asyncio.sleep(min(1.0, idle_s / 4))
