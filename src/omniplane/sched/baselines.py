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
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping
from dataclasses import replace

from omniplane.policy import Policy, SeqInfo, StepContext, StepDecision, StepOutcome


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
