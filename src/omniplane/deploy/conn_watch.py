"""Connections that send no request: closed after ``idle_s``; requests whose line and headers
never end: 431 (:func:`bounded_head`).

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


MAX_HEAD_BYTES = 64 * 1024  # assumption: a request line and headers fit in 64 KiB (h11 and Node: 16 KiB)
_WHY = f"the request line and headers are over {MAX_HEAD_BYTES // 1024} KiB\n".encode()
TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
             b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_WHY), _WHY))


def bounded_head(protocol: type[Any], max_bytes: int = MAX_HEAD_BYTES) -> type[Any]:
    """``protocol`` (uvicorn's httptools protocol) with a cap on a request's line and headers.
    uvicorn's httptools protocol has none: a client sending header lines without end grew the
    router to 660 MB in 3 s (h11 has its own cap, 16 KiB). Past ``max_bytes`` before its headers
    end, a request gets HTTP 431 and its connection closes. Other protocols are returned as
    they are."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # no httptools: uvicorn uses h11
        return protocol
    if not issubclass(protocol, HttpToolsProtocol) or getattr(protocol, "max_head_bytes", None):
        return protocol

    class BoundedHead(protocol):  # type: ignore[misc]
        max_head_bytes = max_bytes
        _in_head, _head = True, 0  # reading a request's line and headers; their bytes so far
        _ended = False  # a request ended in this read: its bytes were not a head's

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._in_head = self._ended = True  # what comes next is the next request's head
            super().on_message_complete()

        def data_received(self, data: bytes) -> None:
            self._ended = False
            super().data_received(data)
            if not self._in_head or self._ended:
                self._head = 0
                return
            self._head += len(data)
            if self._head > self.max_head_bytes and not self.transport.is_closing():
                cycle = self.cycle
                if cycle is None or cycle.response_complete:  # no answer under way on it
                    self.transport.write(TOO_LARGE)
                self.transport.close()

    BoundedHead.__name__ = f"BoundedHead{protocol.__name__}"
    return BoundedHead
