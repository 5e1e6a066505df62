"""The scheduling-policy contract: how a policy steers an LLM stage, step by step.

A leaf module: it imports nothing from omniplane (nor numpy, pydantic or anything outside the
standard library), so every process that drives a policy (the simulator, vLLM's scheduler in
each engine process) or implements one (``omniplane.sched``, a user's ``import:MODULE:NAME``)
loads only this file to speak the contract (``tests/test_policy_contract.py`` checks it in a
fresh interpreter). Which name maps to which policy is :mod:`omniplane.sched.factory`.

Call order, for one shared-stage engine (the simulator's LLM engine, or vLLM's scheduler in
the integration package):

1. ``on_arrival(info, now)`` once per request, when it first reaches the stage.
2. At every iteration boundary: ``decide(ctx) -> StepDecision``. The decision *hides* some
   waiting requests from the base scheduler for this step only (they are restored after it:
   nothing is reordered permanently or dropped), may give a preferred ``order`` of the visible
   waiting requests (None keeps FCFS), and sets the stage's SM cap (None: no cap).
3. The base scheduler (FCFS continuous batching, like vLLM's) builds the batch from the visible
   requests; the step runs.
4. ``on_step(outcome)`` with what ran and how long it took.
5. ``on_finish(rid, now)`` when the request's work in this stage is complete.

Decisions are plain dataclasses so that the same policy object drives the simulator and vLLM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class PathClass(StrEnum):
    """Where a request's first response comes from (HorizonServe section 2): the one path-class
    type of omniplane (request types in specs, class profiles, vLLM request classes)."""

    SHORT = "short"  # stops at the shared stage (first response from the thinker: text)
    LONG = "long"  # continues into downstream generators (speech, image)


@dataclass(frozen=True, slots=True)
class SeqInfo:
    """What a policy may know about one request in the stage."""

    rid: int
    type: str
    arrival: float  # arrival of the request at the system (not at this stage)
    prompt_tokens: int
    computed_tokens: int  # prompt tokens already prefilled
    output_tokens: int  # tokens this stage will generate
    generated: int  # tokens generated so far

    @property
    def decoding(self) -> bool:
        return self.computed_tokens >= self.prompt_tokens and self.generated > 0


@dataclass(frozen=True, slots=True)
class StepContext:
    now: float
    step: int
    waiting: Sequence[SeqInfo]  # not admitted yet (or preempted), FCFS order
    running: Sequence[SeqInfo]  # admitted: decode continuations and partial prefills
    downstream_active: int  # requests active in co-located downstream stages
    bw_util: float  # memory-bandwidth utilisation of the GPU (fraction of peak), last step
    total_sms: int


@dataclass(frozen=True, slots=True)
class StepDecision:
    hidden: frozenset[int] = frozenset()
    order: tuple[int, ...] | None = None
    sm_cap: int | None = None


@dataclass(frozen=True, slots=True)
class StepOutcome:
    now: float  # end of the step
    duration: float
    scheduled: tuple[int, ...]  # rids that got tokens this step
    first_tokens: tuple[int, ...]  # rids whose first token came out of this step
    sm_cap: int | None


class Policy(Protocol):
    """A scheduling policy for one LLM stage (see the module docstring for the call order)."""

    name: str

    def on_arrival(self, info: SeqInfo, now: float) -> None: ...

    def decide(self, ctx: StepContext) -> StepDecision: ...

    def on_step(self, outcome: StepOutcome) -> None: ...

    def on_finish(self, rid: int, now: float) -> None: ...


class FCFS:
    """The base behaviour: nothing hidden, arrival order, no SM cap."""

    _DECISION = StepDecision()

    def __init__(self, name: str = "fcfs") -> None:
        self.name = name

    def on_arrival(self, info: SeqInfo, now: float) -> None:
        return None

    def decide(self, ctx: StepContext) -> StepDecision:
        return self._DECISION

    def on_step(self, outcome: StepOutcome) -> None:
        return None

    def on_finish(self, rid: int, now: float) -> None:
        return None


def visible_waiting(waiting: Sequence[SeqInfo], decision: StepDecision) -> list[SeqInfo]:
    """The waiting requests the base scheduler may admit this step, in admission order."""
    shown = [s for s in waiting if s.rid not in decision.hidden]
    if decision.order is None:
        return shown
    rank = {rid: i for i, rid in enumerate(decision.order)}
    return sorted(shown, key=lambda s: rank.get(s.rid, len(rank)))
