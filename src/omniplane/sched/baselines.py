"""Baseline policies behind the same interface (HorizonServe section 6.1, "Baselines").

* **Vanilla** and **MPS** admit in arrival order (vLLM's FCFS): :class:`omniplane.policy.FCFS`;
  they differ only in how the stages share the GPU (time slicing vs. MPS, see
  :mod:`omniplane.sched.factory`).
* **EDF** and **EDF+MPS** order the waiting requests by first-response deadline
  ``d = arrival + SLO(class)`` ("EDF orders eligible requests by first-response deadline while
  leaving GPU sharing unchanged"); nothing is hidden and no SM cap is set.
* **Static split** and **EDF on the split** (attribution baselines, not in the paper): FCFS or
  EDF with the shared stage held at ``S_cap`` SMs on every step, the split HorizonServe's
  ladder tops out at, so that what SM *throttling* (moving the cap with memory pressure) adds
  beyond a fixed split is measured (:class:`FixedSplit`).

Baselines that ship today (not in the paper):

* **static-cap**: SGLang-Omni caps one stage's SMs statically with a green context (groups of 8
  SMs on H100/H200) and picks the cap from a one-sided capacity curve (the stage's throughput
  against its SM count). Here the shared stage is held on every step at
  :func:`omniplane.sched.calibration.capacity_cap` of the calibration's fixed-SM sweep (the
  smallest partition size whose modelled decode throughput reaches ``CAPACITY_FRACTION`` of the
  whole GPU's); admission stays FCFS (:class:`FixedSplit` over FCFS).
* **priority**: vLLM's ``--scheduling-policy priority`` with a priority per request class
  (:class:`ClassPriority`).
* **edf**: the paper's EDF above (vLLM-Omni has open work on EDF deadlines).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping
from dataclasses import replace

from omniplane.policy import PathClass, Policy, SeqInfo, StepContext, StepDecision, StepOutcome


class EDF:
    """Earliest-deadline-first admission order over the waiting requests."""

    def __init__(self, slo_s: Mapping[str, float], *, name: str = "edf") -> None:
        bad = {c: v for c, v in slo_s.items() if not v > 0}
        if not slo_s or bad:
            raise ValueError(f"EDF needs a positive SLO per class, got {dict(slo_s)}")
        self.name = name
        self.slo_s = dict(slo_s)
        self._deadline: dict[int, float] = {}
        self._queue: list[tuple[float, int]] = []  # waiting, by deadline

    def on_arrival(self, info: SeqInfo, now: float) -> None:
        slo = self.slo_s.get(info.type)
        if slo is None:
            raise KeyError(f"EDF: no SLO for request class {info.type!r}; have {sorted(self.slo_s)}")
        d = info.arrival + slo
        self._deadline[info.rid] = d
        insort(self._queue, (d, info.rid))

    def decide(self, ctx: StepContext) -> StepDecision:
        if not self._queue:
            return StepDecision()
        return StepDecision(order=tuple(rid for _, rid in self._queue))

    def _drop(self, rid: int) -> None:
        d = self._deadline.get(rid)
        if d is None:
            return
        i = bisect_left(self._queue, (d, rid))
        if i < len(self._queue) and self._queue[i] == (d, rid):
            del self._queue[i]

    def on_step(self, outcome: StepOutcome) -> None:
        for rid in outcome.scheduled:
            self._drop(rid)

    def on_finish(self, rid: int, now: float) -> None:
        self._drop(rid)
        self._deadline.pop(rid, None)


class FixedSplit:
    """``inner``'s admission decisions with the shared stage's SM cap fixed at ``sm_cap``."""

    def __init__(self, inner: Policy, sm_cap: int, *, name: str) -> None:
        if sm_cap < 1:
            raise ValueError(f"FixedSplit needs an SM cap >= 1, got {sm_cap}")
        self.name = name
        self.inner = inner
        self.sm_cap = sm_cap
        self._plain = StepDecision(sm_cap=sm_cap)

    def on_arrival(self, info: SeqInfo, now: float) -> None:
        self.inner.on_arrival(info, now)

    def decide(self, ctx: StepContext) -> StepDecision:
        d = self.inner.decide(ctx)
        if not d.hidden and d.order is None:
            return self._plain
        return replace(d, sm_cap=self.sm_cap)

    def on_step(self, outcome: StepOutcome) -> None:
        self.inner.on_step(outcome)

    def on_finish(self, rid: int, now: float) -> None:
        self.inner.on_finish(rid, now)


class ClassPriority:
    """vLLM's priority scheduling with the priority set by request class.

    vLLM v1 (``vllm/v1/core/sched/request_queue.py``, ``PriorityRequestQueue``) orders its waiting
    queue by ``(priority, arrival_time)``: a smaller priority value first, FCFS within one value.
    Here each class's priority is given (default: short-path classes 0, long-path classes 1, so
    text-first requests go ahead of speech/image ones). Nothing is hidden and no SM cap is set.
    Not modelled: vLLM's preemption of the running request with the largest ``(priority,
    arrival_time)`` when the KV cache runs out (``vllm/v1/core/sched/scheduler.py``); the policy
    contract has no preemption hook, so the base scheduler preempts as it does for every policy.
    """

    def __init__(self, priority: Mapping[str, int], *, name: str = "priority") -> None:
        if not priority:
            raise ValueError("ClassPriority needs a priority per request class, got none")
        self.name = name
        self.priority = dict(priority)

    @classmethod
    def by_path(cls, paths: Mapping[str, PathClass], *, name: str = "priority") -> ClassPriority:
        """Short-path classes priority 0, long-path classes 1 (assumption: the deployer's choice)."""
        return cls({c: 0 if p is PathClass.SHORT else 1 for c, p in paths.items()}, name=name)

    def on_arrival(self, info: SeqInfo, now: float) -> None:
        if info.type not in self.priority:
            raise KeyError(f"priority: no priority for request class {info.type!r}; "
                           f"have {sorted(self.priority)}")

    def decide(self, ctx: StepContext) -> StepDecision:
        if len(ctx.waiting) < 2:
            return StepDecision()
        prio = self.priority
        ranked = sorted(ctx.waiting, key=lambda s: (prio[s.type], s.arrival, s.rid))
        return StepDecision(order=tuple(s.rid for s in ranked))

    def on_step(self, outcome: StepOutcome) -> None:
        return None

    def on_finish(self, rid: int, now: float) -> None:
        return None
