"""An executor: one process on ``tp`` GPUs running one or more components (a merged executor
runs them in turns), one step at a time, on its own GPUs or on a GPU shared with another
executor (:mod:`omniplane.sim.gpu`).

Steps are formed at the end of an instant (``EventLoop.soon``): a step sees all the work that
arrived at that instant (three requests released by one upstream step and transferred together
join one step, whatever order their events ran in), and all the effects of the step that just
ended (a merged node's next component, a vocoder's rest of audio).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

from omniplane.sim.engines import Engine, Step
from omniplane.sim.eventloop import COMPLETE, EventLoop
from omniplane.sim.job import Job

if TYPE_CHECKING:
    from omniplane.sim.stats import ExecutorStats


class GPUSlot(Protocol):
    """A GPU this executor shares with others: when its next step may start and how long it
    takes there (the sharing modes are :mod:`omniplane.sim.gpu`'s)."""

    def can_start(self, ex: Executor) -> bool: ...

    def begin(self, ex: Executor, step: Step) -> float: ...

    def end(self, ex: Executor) -> None: ...

    def after_end(self, ex: Executor) -> None: ...


class Executor:
    def __init__(self, name: str, node: str, engines: list[Engine], loop: EventLoop, stats: ExecutorStats,
                 *, gpu: GPUSlot | None = None, can_span: bool = True) -> None:
        self.name = name
        self.node = node
        self.engines = engines
        self.by_comp = {e.comp: e for e in engines}
        for e in engines:
            e.executor = self
        self.loop = loop
        self.gpu = gpu  # a GPU shared with other executors; None: the executor owns its GPUs
        self.stats = stats
        self.can_span = can_span  # False where each iteration must be seen (shared GPUs, checks)
        self.load = 0  # requests pinned here (merged nodes) and not yet through (JSQ routing)
        self.busy = False
        self._turn = 0
        self._engine: Engine | None = None
        self._step: Step | None = None  # None while busy: the step ended and its effects land
        self._started = 0.0
        self._version = 0  # bumps when the step in flight is cut short (stale end events)
        self._forming = False  # a step formation waits for the end of the instant
        # the engines in turn order starting at each engine: (engine, the others), precomputed
        n = len(engines)
        self._turns = [[(engines[(t + k) % n], (t + k + 1) % n,
                         tuple(e for e in engines if e is not engines[(t + k) % n])) for k in range(n)]
                       for t in range(n)]

    def offer(self, job: Job) -> None:
        """A job pinned to this executor is ready."""
        job.host.add(job, False)
        self.kick()

    def outstanding(self) -> int:
        total = 0
        for e in self.engines:
            total += e.active()
        return total

    def kick(self, _: object = None) -> None:
        """There may be work: if idle, form the next step at the end of the instant. While a
        multi-iteration span runs, new work cuts it at the next iteration boundary."""
        if self.busy:
            step = self._step
            if step is not None and step.iterations > 1:
                self._cut(step)
        elif not self._forming:
            for e in self.engines:
                if e.has_work():
                    self._forming = True
                    self.loop.soon(self._form)
                    return

    def _form(self) -> None:
        """Start the next step if some engine has work (engines take turns)."""
        self._forming = False
        if self.busy:
            return
        gpu = self.gpu
        if gpu is not None and not gpu.can_start(self):
            return
        now = self.loop.now
        engines = self.engines
        n = len(engines)
        if n == 1:
            engine = engines[0]
            step = engine.start(now)
            if step is None:
                return
            if self.can_span:
                engine.extend(step)
        else:
            for engine, after, others in self._turns[self._turn]:
                if not engine.has_work():
                    continue
                step = engine.start(now)
                if step is None:
                    continue
                self._turn = after
                if self.can_span:
                    for e in others:
                        if e.has_work():
                            break
                    else:
                        engine.extend(step)
                break
            else:
                return
        self.busy, self._engine, self._step, self._started = True, engine, step, now
        duration = step.duration if gpu is None else gpu.begin(self, step)
        self.loop.at(now + duration, self._end, self._version, COMPLETE)

    def move_end(self, end: float) -> None:
        """The step in flight now ends at ``end``: a time-sliced GPU changed this executor's share
        of the GPU's time while the step runs (:class:`omniplane.sim.gpu.TimeSliced`)."""
        self._version += 1
        self.loop.at(end, self._end, self._version, COMPLETE)

    def _cut(self, step: Step) -> None:
        """End the span in flight at the first iteration boundary not before now."""
        j, end = cut_index(step.bounds, step.iterations, step.duration, self.loop.now - self._started)
        if j >= step.iterations:
            return
        engine = self._engine
        assert engine is not None
        step.iterations, step.duration = j, end
        engine.cut(j)
        self._version += 1
        self.loop.at(self._started + step.duration, self._end, self._version, COMPLETE)

    def _end(self, version: int) -> None:
        if version != self._version:
            return  # this step was cut short; its new end event is queued
        now = self.loop.now
        engine, step = self._engine, self._step
        assert engine is not None and step is not None
        self._step = None  # still busy while the step's effects land
        gpu = self.gpu
        if gpu is not None:
            gpu.end(self)
        engine.finish(now)
        self.busy, self._engine = False, None
        stats = self.stats  # ExecutorStats.record, inline (once per step)
        stats.busy += now - self._started
        n, kind = step.iterations, step.kind
        stats.steps += n
        by_kind = stats.by_kind
        by_kind[kind] = by_kind.get(kind, 0) + n
        if stats.trace is not None:
            stats.trace.append((self._started, now, engine.comp, kind, step.batch, n))
        if now >= stats.next_sample:  # the queue length, at a step end at most every SAMPLE_S
            stats.next_sample = now + stats.SAMPLE_S
            n = self.outstanding()
            timeline = stats.queue
            if not timeline or timeline[-1][1] != n:
                timeline.append((now, n))
        if gpu is None:
            self.kick()
        else:
            gpu.after_end(self)  # kicks this executor and, on a shared GPU, the others


def cut_index(span: Any, iterations: int, duration: float, elapsed: float) -> tuple[int, float]:
    """Smallest ``j`` in ``1 .. iterations`` whose end ``span.end(j)`` is at or after ``elapsed``
    (``duration = span.end(iterations)``), and that end. Searched from the linear estimate
    outwards: decode iterations take nearly equal times, so it is one to three evaluations."""
    if elapsed >= duration:
        return iterations, duration
    j = min(max(math.ceil(elapsed / duration * iterations), 1), iterations) if duration > 0 else 1
    end = span.end
    t = end(j)
    while t < elapsed and j < iterations:
        j += 1
        t = end(j)
    while j > 1:
        before = end(j - 1)
        if before < elapsed:
            break
        j, t = j - 1, before
    return j, t
