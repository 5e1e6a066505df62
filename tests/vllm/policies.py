"""Small policies for the integration tests, loaded by the scheduler through
``policy: import:tests.vllm.policies:NAME`` (each takes the factory's ``PolicyInputs``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from omniplane.policy import SeqInfo, StepContext, StepDecision, StepOutcome

# The scheduler's ``policy:`` value that loads one of these classes: POLICY_PREFIX + its name.
POLICY_PREFIX = f"import:{__name__}:"


class Recording:
    """Hides nothing; records every call so tests can check the call contract."""

    name = "recording"

    def __init__(self, inputs: Any = None) -> None:
        self.inputs = inputs
        self.arrivals: Counter[int] = Counter()
        self.finishes: Counter[int] = Counter()
        self.info: dict[int, SeqInfo] = {}
        self.outcomes: list[StepOutcome] = []
        self.contexts: list[tuple[int, int, int, float]] = []  # step, waiting, running, bw
        self.downstream: list[int] = []
        self.last_hidden: frozenset[int] = frozenset()
        self.calls: list[str] = []

    def on_arrival(self, info: SeqInfo, now: float) -> None:
        self.arrivals[info.rid] += 1
        self.info[info.rid] = info
        self.calls.append("arrival")

    def choose(self, ctx: StepContext) -> StepDecision:
        return StepDecision()

    def decide(self, ctx: StepContext) -> StepDecision:
        self.calls.append("decide")
        self.contexts.append((ctx.step, len(ctx.waiting), len(ctx.running), ctx.bw_util))
        self.downstream.append(ctx.downstream_active)
        d = self.choose(ctx)
        self.last_hidden = d.hidden
        return d

    def on_step(self, outcome: StepOutcome) -> None:
        self.calls.append("step")
        self.outcomes.append(outcome)

    def on_finish(self, rid: int, now: float) -> None:
        self.calls.append("finish")
        self.finishes[rid] += 1


class HideEveryOther(Recording):
    """Hides every other waiting request that is not decoding, alternating with the step."""

    name = "hide-every-other"

    def choose(self, ctx: StepContext) -> StepDecision:
        hidden = frozenset(
            s.rid for i, s in enumerate(ctx.waiting) if (i + ctx.step) % 2 == 1 and not s.decoding
        )
        return StepDecision(hidden=hidden)


class HideAll(Recording):
    name = "hide-all"

    def choose(self, ctx: StepContext) -> StepDecision:
        return StepDecision(hidden=frozenset(s.rid for s in ctx.waiting))


class Reverse(Recording):
    """Admits the newest waiting request first."""

    name = "reverse"

    def choose(self, ctx: StepContext) -> StepDecision:
        return StepDecision(order=tuple(s.rid for s in reversed(list(ctx.waiting))))


class Raising(Recording):
    """Fails in every third ``decide`` and in every ``on_step``."""

    name = "raising"

    def choose(self, ctx: StepContext) -> StepDecision:
        if len(self.contexts) % 3 == 1:
            raise RuntimeError("policy failure (test)")
        return StepDecision(hidden=frozenset(s.rid for s in ctx.waiting))

    def on_step(self, outcome: StepOutcome) -> None:
        super().on_step(outcome)
        raise ValueError("on_step failure (test)")


class Capper(Recording):
    """Caps the shared stage at 64 SMs while a downstream stage is active."""

    name = "capper"

    def choose(self, ctx: StepContext) -> StepDecision:
        return StepDecision(sm_cap=64 if ctx.downstream_active else None)


class FixedCap(Recording):
    """Caps the shared stage at 64 SMs on every step."""

    name = "fixed-cap"

    def choose(self, ctx: StepContext) -> StepDecision:
        return StepDecision(sm_cap=64)


class WatchedHorizon(Recording):
    """HorizonServe as ``policy: horizon`` builds it (the same settings), with Recording's
    bookkeeping around it so the tests can check the call contract and the views."""

    name = "watched-horizon"

    def __init__(self, inputs: Any) -> None:
        from omniplane.vllm.policies import scheduler_policy

        super().__init__(inputs)
        self.inner = scheduler_policy("horizon", inputs)
        self.caps: list[int | None] = []

    def on_arrival(self, info: SeqInfo, now: float) -> None:
        super().on_arrival(info, now)
        self.inner.on_arrival(info, now)

    def choose(self, ctx: StepContext) -> StepDecision:
        d = self.inner.decide(ctx)
        self.caps.append(d.sm_cap)
        return d

    def on_step(self, outcome: StepOutcome) -> None:
        super().on_step(outcome)
        self.inner.on_step(outcome)

    def on_finish(self, rid: int, now: float) -> None:
        super().on_finish(rid, now)
        self.inner.on_finish(rid, now)
