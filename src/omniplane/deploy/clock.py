"""Model time on a wall clock, and the simulator's event kernel driven by asyncio in real time.

The emulated engine reuses the simulator's executors and engines unchanged: they only need an
event loop with ``now`` and ``at(time, callback, arg, priority)``. :class:`RealTimeLoop` is that
loop, with events fired by asyncio at the wall time the model time maps to.

Time scale: ``scale`` wall seconds per model second (``scale = 10`` plays 1 s of GPU time in
10 s, so a 16-GPU plan fits on two cores). Wall time is ``time.time()`` so that timestamps
agree across processes and hosts of one Ray cluster (NTP-level agreement across hosts).

Catch-up rule: a timer that fires late runs at its *nominal* model time unless something
later has already been observed, so a chain of steps (an executor busy back to back) does not
drift when the process is briefly descheduled. How late timers fire is recorded
(:class:`LagStats`): it is the emulation's CPU-headroom signal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from omniplane.sim.eventloop import ARRIVE, EventLoop

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VirtualClock:
    """``model = (wall - epoch) / scale``; ``epoch`` is a ``source()`` value (``time.time`` by
    default; tests pass a virtual-time event loop's ``time``)."""

    epoch: float
    scale: float = 1.0
    source: Callable[[], float] = field(default=time.time, compare=False)

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise ValueError(f"time scale must be > 0 (got {self.scale})")

    @staticmethod
    def starting_now(scale: float = 1.0, source: Callable[[], float] = time.time) -> VirtualClock:
        return VirtualClock(source(), scale, source)

    def now(self) -> float:
        """Model seconds since the epoch."""
        return (self.source() - self.epoch) / self.scale

    def wall_delay(self, model_time: float) -> float:
        """Wall seconds from now until ``model_time`` (negative if it has passed)."""
        return self.epoch + model_time * self.scale - self.source()

    async def sleep_until(self, model_time: float) -> None:
        delay = self.wall_delay(model_time)
        if delay > 0:
            await asyncio.sleep(delay)


@dataclass
class LagStats:
    """How late timers fired, in model seconds (a histogram would be overkill: keep a sample)."""

    count: int = 0
    total: float = 0.0
    worst: float = 0.0
    sample: list[float] = field(default_factory=list)
    keep: int = 4096

    def add(self, lag: float) -> None:
        self.count += 1
        self.total += lag
        self.worst = max(self.worst, lag)
        if len(self.sample) < self.keep:
            self.sample.append(lag)
        else:  # deterministic reservoir-ish thinning: overwrite round-robin
            self.sample[self.count % self.keep] = lag

    def summary(self) -> dict[str, float]:
        s = sorted(self.sample)

        def pct(q: float) -> float:
            return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0

        return {
            "timers": float(self.count),
            "mean_ms": 1e3 * self.total / self.count if self.count else 0.0,
            "p50_ms": 1e3 * pct(0.5),
            "p99_ms": 1e3 * pct(0.99),
            "max_ms": 1e3 * self.worst,
        }


class RealTimeLoop(EventLoop):
    """The simulator's event-loop interface, fired by asyncio in (scaled) real time.

    Call :meth:`sync` on entry from outside (a new job, a release) so that ``now`` is the
    current model time before anything reads it. Callbacks that raise are logged and recorded
    in ``errors`` (asyncio would otherwise only log them).
    """

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock
        self.lag = LagStats()
        self.errors: list[str] = []
        self.fired = 0

    def sync(self) -> float:
        self.now = max(self.now, self.clock.now())
        return self.now

    def at(
        self, time: float, callback: Callable[[Any], None], arg: Any = None, priority: int = ARRIVE
    ) -> None:
        when = max(time, self.now)
        aio = asyncio.get_running_loop()
        aio.call_later(max(0.0, self.clock.wall_delay(when)), self._fire, when, callback, arg)

    def soon(self, callback: Callable[[], None]) -> None:
        """After the timers of this moment (asyncio runs them before what is asked now)."""
        asyncio.get_running_loop().call_soon(self._run_soon, callback)

    def _run_soon(self, callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception as exc:  # keep the replica alive; the error is reported in stats
            log.exception("emulated engine event failed")
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _fire(self, when: float, callback: Callable[[Any], None], arg: Any) -> None:
        self.lag.add(max(0.0, self.clock.now() - when))
        self.now = max(self.now, when)
        self.fired += 1
        try:
            callback(arg)
        except Exception as exc:  # keep the replica alive; the error is reported in stats
            log.exception("emulated engine event failed")
            self.errors.append(f"{type(exc).__name__}: {exc}")

    @property
    def events(self) -> int:
        return self.fired

    def run(self, until: float = float("inf")) -> None:
        raise RuntimeError("a RealTimeLoop is driven by asyncio; it has no run()")
