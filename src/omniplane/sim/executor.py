"""An executor: one process on ``tp`` GPUs running one or more components (a merged executor
runs them in turns), one step at a time, on a GPU it may share with another executor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omniplane.sim.engines import Engine, Step
from omniplane.sim.eventloop import COMPLETE, EventLoop
from omniplane.sim.job import Job

if TYPE_CHECKING:
    from omniplane.sim.gpu import GPUSlot
    from omniplane.sim.metrics import ExecutorStats


class Executor:
    def __init__(self, name: str, node: str, engines: list[Engine], loop: EventLoop,
                 gpu: GPUSlot, stats: ExecutorStats) -> None:
        self.name = name
        self.node = node
        self.engines = engines
        self.by_comp = {e.comp: e for e in engines}
        for e in engines:
            e.executor = self
        self.loop = loop
        self.gpu = gpu
        self.stats = stats
        self.load = 0  # requests pinned here (merged nodes) and not yet through (JSQ routing)
        self.busy = False
        self._turn = 0
        self._engine: Engine | None = None
        self._step: Step | None = None
        self._started = 0.0
        self._version = 0  # bumps when the step in flight is cut short (stale end events)
        self.can_span = True  # set False where each iteration must be seen (shared GPUs)

    def engine_for(self, comp: str) -> Engine:
        return self.by_comp[comp]

    def offer(self, job: Job) -> None:
        """A job pinned to this executor is ready."""
        job.host.add(job, False)
        self.kick()

    def outstanding(self) -> int:
        if len(self.engines) == 1:
            return self.engines[0].active()
        return sum(e.active() for e in self.engines)

    def kick(self, _: object = None) -> None:
        """Start the next step if idle and some engine has work (engines take turns). While a
        multi-iteration span runs, new work cuts it at the next iteration boundary."""
        if self.busy:
            if self._step is not None and self._step.iterations > 1:
                self._cut()
            return
        if not self.gpu.can_start(self):
            return
        now = self.loop.now
        n = len(self.engines)
        for k in range(n):
            engine = self.engines[(self._turn + k) % n]
            if not engine.has_work():
                continue
            step = engine.start(now)
            if step is None:
                continue
            self._turn = (self._turn + k + 1) % n
            if self.can_span and (n == 1 or not any(e.has_work() for e in self.engines
                                                       if e is not engine)):
                engine.extend(step)
            self.busy, self._engine, self._step, self._started = True, engine, step, now
            duration = self.gpu.begin(self, step)
            self.loop.at(now + duration, self._end, self._version, COMPLETE)
            return

    def _cut(self) -> None:
        """End the span in flight at the first iteration boundary not before now."""
        step, engine = self._step, self._engine
        assert step is not None and step.bounds is not None and engine is not None
        j = step.bounds.cut_index(self.loop.now - self._started)
        if j >= step.iterations:
            return
        step.iterations, step.duration = j, step.bounds.end(j)
        engine.cut(j)
        self._version += 1
        self.loop.at(self._started + step.duration, self._end, self._version, COMPLETE)

    def _end(self, version: int) -> None:
        if version != self._version:
            return  # this step was cut short; its new end event is queued
        now = self.loop.now
        engine, step = self._engine, self._step
        assert engine is not None and step is not None
        self.busy, self._engine, self._step = False, None, None
        self.gpu.end(self)
        engine.finish(now)
        stats = self.stats
        stats.record(self._started, now, step, engine.comp)
        if now >= stats.next_sample:
            stats.sample(now, self.outstanding())
        self.gpu.after_end(self)  # kicks this executor (and, on a shared GPU, the others)
