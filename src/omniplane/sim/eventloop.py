"""The event loop: a tiny discrete-event kernel: a heap of events ordered by (time, priority, sequence).

Rules, written down (after SimPy's ``core.py``):

* Time never goes backwards: scheduling an event in the past raises ``ValueError``.
* Events at the same time run in ``priority`` order (lower first), then in the order they
  were scheduled (``sequence``), so a run is deterministic for a given seed.
* A callback that raises stops the run; the exception propagates unchanged with the event
  that raised it attached as a note.
* ``run(until=t)`` stops before the first event later than ``t`` and leaves it queued.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

Callback = Callable[[Any], None]

# Priorities for same-time events: completions free resources before new work is admitted.
COMPLETE = 0
ARRIVE = 1
DISPATCH = 2


class EventLoop:
    __slots__ = ("_heap", "_seq", "events", "now")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Callback, Any]] = []
        self._seq = 0
        self.now = 0.0
        self.events = 0

    def at(self, time: float, callback: Callback, arg: Any = None, priority: int = ARRIVE) -> None:
        """Run ``callback(arg)`` at ``time``."""
        if time < self.now:
            raise ValueError(f"cannot schedule an event at {time} before now ({self.now})")
        self._seq += 1
        heapq.heappush(self._heap, (time, priority, self._seq, callback, arg))

    def after(self, delay: float, callback: Callback, arg: Any = None, priority: int = ARRIVE) -> None:
        self.at(self.now + delay, callback, arg, priority)

    def run(self, until: float = float("inf")) -> None:
        """Process events in order until none is left or the next is later than ``until``."""
        heap, pop = self._heap, heapq.heappop
        while heap and heap[0][0] <= until:
            time, _prio, _seq, callback, arg = pop(heap)
            self.now = time
            self.events += 1
            try:
                callback(arg)
            except Exception as exc:
                exc.add_note(f"in event {getattr(callback, '__qualname__', callback)} at t={time}")
                raise
        if until != float("inf") and until > self.now:
            self.now = until

    @property
    def pending(self) -> int:
        return len(self._heap)
