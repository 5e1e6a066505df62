"""The event loop: a tiny discrete-event kernel, a heap of events ordered by (time, priority,
sequence), plus one sorted stream of arrivals merged into it.

Rules, written down (after SimPy's ``core.py``):

* Time never goes backwards: scheduling an event in the past raises ``ValueError``.
* Events at the same time run in ``priority`` order (lower first), then in the order they
  were scheduled (``sequence``), so a run is deterministic for a given seed.
* ``soon(callback)`` runs ``callback()`` after every event at the current time (the end of the
  instant), in the order asked; executors form their steps there, so a step sees all the work
  that arrived at that instant whatever order the same-time events ran in.
* A *stream* (``stream(times, callback)``: ``callback(i)`` at ``times[i]``, non-decreasing) is
  a sequence of events all scheduled before any other: at equal time and priority its items
  run first. It costs no heap operation per item (a simulation's arrivals are one).
* A callback that raises stops the run; the exception propagates unchanged with the event
  that raised it attached as a note.
* ``run(until=t)`` stops before the first event later than ``t`` and leaves it queued.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from mypy_extensions import mypyc_attr

Callback = Callable[[Any], None]
INF = float("inf")

# Priorities for same-time events: completions free resources before new work is admitted.
COMPLETE = 0
ARRIVE = 1
DISPATCH = 2


@mypyc_attr(allow_interpreted_subclasses=True)  # the emulated engine's RealTimeLoop is one
class EventLoop:
    __slots__ = ("_fed", "_feed", "_heap", "_prio", "_seq", "_soon", "_times", "now")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Callback, Any]] = []
        self._seq = 0
        self.now = 0.0
        self._times: Sequence[float] = ()
        self._feed: Callable[[int], None] | None = None
        self._prio = ARRIVE
        self._fed = 0  # stream items run so far
        self._soon: list[Callable[[], None]] = []

    def at(self, time: float, callback: Callback, arg: Any = None, priority: int = ARRIVE) -> None:
        """Run ``callback(arg)`` at ``time``."""
        if time < self.now:
            raise ValueError(f"cannot schedule an event at {time} before now ({self.now})")
        self._seq += 1
        heapq.heappush(self._heap, (time, priority, self._seq, callback, arg))

    def after(self, delay: float, callback: Callback, arg: Any = None, priority: int = ARRIVE) -> None:
        self.at(self.now + delay, callback, arg, priority)

    def soon(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` at the end of the current instant (after every event at now)."""
        self._soon.append(callback)

    def stream(self, times: Sequence[float], callback: Callable[[int], None], priority: int = ARRIVE) -> None:
        """Run ``callback(i)`` at ``times[i]`` for every ``i`` (one stream per loop)."""
        if self._feed is not None:
            raise ValueError("this event loop already has a stream")
        if any(b < a for a, b in pairwise(times)):
            raise ValueError("stream times must be non-decreasing")
        if len(times) and times[0] < self.now:
            raise ValueError(f"cannot schedule an event at {times[0]} before now ({self.now})")
        self._times, self._feed, self._prio, self._fed = times, callback, priority, 0

    def run(self, until: float = INF) -> None:
        """Process events in order until none is left or the next is later than ``until``."""
        heap, pop, soon = self._heap, heapq.heappop, self._soon
        times, feed, prio = self._times, self._feed, self._prio
        i, n = self._fed, len(times)
        nxt = times[i] if i < n else INF
        callback: Any = None
        time = self.now
        try:
            while True:
                # the next event: the heap's first, or the stream's next item
                if heap:
                    top = heap[0]
                    time = top[0]
                    from_stream = nxt < time or (nxt == time and prio <= top[1])
                    if from_stream:
                        time = nxt
                elif i < n:
                    time, from_stream = nxt, True
                elif soon:
                    time, from_stream = INF, False
                else:
                    break
                if soon and time > self.now:  # the instant is over: what waited for its end
                    k = 0
                    while k < len(soon):
                        callback = soon[k]
                        k += 1
                        callback()
                    soon.clear()
                    continue
                if time > until:
                    break
                self.now = time
                if from_stream:
                    callback = feed
                    i += 1
                    self._fed = i
                    nxt = times[i] if i < n else INF
                    feed(i - 1)  # type: ignore[misc]
                else:
                    _, _, _, callback, arg = pop(heap)
                    callback(arg)
        except Exception as exc:
            exc.add_note(f"in event {getattr(callback, '__qualname__', callback)} at t={self.now}")
            raise
        if until != INF and until > self.now:
            self.now = until

    @property
    def events(self) -> int:
        """Events processed so far (stream items included)."""
        return self._seq - len(self._heap) + self._fed

    @property
    def pending(self) -> int:
        return len(self._heap) + len(self._times) - self._fed
