"""A virtual-time asyncio event loop: run the real-time deployment code deterministically.

``loop.time()`` is a counter that jumps to the next timer whenever nothing else is ready, so
``asyncio.sleep(3600)`` returns at once and a timed emulation runs as fast as the CPU allows,
with timers firing exactly on time. The in-process deployment (:mod:`omniplane.deploy.local`)
run this way reproduces the simulator request by request; tests and benchmarks use it. Only for
code without real I/O (a blocked select would mean a deadlock: it raises).
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualTimeLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or self.loop is None or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("virtual-time loop would block forever: nothing is scheduled")
        self.loop.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        sel = _JumpSelector()
        super().__init__(sel)
        sel.loop = self
        self.now = 0.0

    def time(self) -> float:
        return self.now


def run(coro: Coroutine[Any, Any, T]) -> T:
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(coro)
    finally:  # like asyncio.run: cancel what is left, close async generators
        for _ in range(10):  # cancelling may start clean-up tasks: repeat until none is left
            left = asyncio.all_tasks(loop)
            if not left:
                break
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
