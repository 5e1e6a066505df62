"""The evidence of minimality of a mixed fleet's answer at a target rate (``omniplane plan
--inventory ... --rate R``; omniplane.plan.inventory).

The inventory search sizes each candidate by a flow balance at ``R`` and simulates the cheapest
candidates first; the flow balance may hold more GPUs than the simulator needs. So after the
search picks a candidate that meets, the pick's grouping and assignment of stages to kinds is
tried with **one GPU fewer of each kind in turn**: the pick's GPUs of that kind less one,
re-balanced the way the search balances (:func:`omniplane.plan.inventory.size`: the largest rate
those GPUs carry, leftovers to the kind's most loaded stage), simulated at ``R`` on the same
requests. If one of them meets, the cheapest that meets becomes the pick and the step repeats
(a descent); when none meets, those rows are the evidence: each with the type that misses
most. The answer is then minimal against one GPU fewer of any kind *in its own grouping and
assignment*; other groupings are not descended (a heuristic: their flow-balanced sizes are
simulated cheapest first, at most the search's ``top``).

**A row meets only if its flow balance carries ``R``.** The flow balance prices each executor at
full batch, its highest throughput, from the same step times the simulator runs
(tests/plan/test_flow_saturation.py: a saturated talker agrees within 15%), so a row that
carries less than ``R`` cannot serve ``R`` for longer than the sample lasts. Its simulation may
still meet: the sample is ``N / R`` seconds of arrivals (1,200 requests at 60 req/s: 20 s), and
an LLM stage admits the excess into its batch until the batch is full (Qwen3-Omni's talker,
max batch 128, 537 frames/s per executor whatever the batch: docs/decisions/0021), so the first
responses, which the targets measure, stay fast while each stream slows below real time and the
backlog drains after the last arrival. Such a row reports ``flow bound`` and its simulated
attainment, and is not taken.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Candidate = Any  # omniplane.plan.inventory.Candidate (which imports this module)
Resize = Callable[[Any, dict[str, int]], Any]  # (candidate, GPUs per kind) -> re-balanced candidate | None

FLOW_SLACK = 1e-9  # a flow rate equal to R up to rounding carries R
MAX_STEPS = 64  # assumption: a flow balance over-sizes by fewer GPUs than this (each step drops one)
RULE = ("minimal against one GPU fewer of each kind in the pick's grouping (re-balanced by the flow "
        "balance, simulated at the rate; one whose flow balance carries less than the rate is not taken); "
        "other groupings only at their flow-balanced size, cheapest first")


@dataclass
class OneFewer:
    """The pick's grouping with one GPU fewer of ``kind`` (``gpus``: the GPUs allowed per kind)."""

    kind: str
    gpus: dict[str, int]
    cand: Candidate | None = None  # None: no plan (``reason``)
    misses: str | None = None  # the type furthest below the target (None: it meets)
    reason: str = ""
    attainment: dict[str, float] = field(default_factory=dict)
    short: bool = False  # its flow balance carries less than the rate: never taken (module docstring)

    @property
    def meets(self) -> bool:
        return self.cand is not None and self.misses is None and not self.short


def _misses(att: Mapping[str, float], active: Sequence[str], target: float) -> str | None:
    below = [t for t in active if att.get(t, 0.0) < target]
    return min(below, key=lambda t: att.get(t, 0.0)) if below else None


def one_fewer(pick: Candidate, rate: float, target: float, active: Sequence[str],
              run: Callable[[Candidate], None], resize: Resize) -> list[OneFewer]:
    """One row per kind of ``pick`` (module docstring); ``run`` prices and simulates a
    candidate at ``rate`` (sets its ``hourly``, ``goodput``, ``attainment``, ``simulated_at``);
    ``resize`` re-balances its grouping onto a GPU count per kind (inventory.size)."""
    out = []
    used = pick.gpus_by_kind()
    for kind in used:
        budget = {**used, kind: used[kind] - 1}
        row = OneFewer(kind, budget)
        out.append(row)
        c = resize(pick, budget)
        if c is None:
            row.reason = (f"no plan: {budget[kind]} {kind} GPUs do not hold one executor of each stage "
                          f"group on {kind}")
            continue
        run(c)
        row.cand, row.attainment = c, dict(c.attainment)
        row.misses = _misses(c.attainment, active, target)
        if c.flow_rps < rate * (1 - FLOW_SLACK):
            row.short = True
            row.reason = f"flow bound: carries {c.flow_rps:.1f} req/s < {rate:g}"
            if row.misses is None:  # met only while its batches absorb the excess (module docstring)
                row.reason += "; met on the sample only, while its batches absorb the excess"
    return out


def descend(pick: Candidate, rate: float, target: float, active: Sequence[str],
            run: Callable[[Candidate], None], resize: Resize, log: Callable[[str], None] = lambda _m: None
            ) -> tuple[Candidate, list[OneFewer], int]:
    """``(the pick, its one-fewer rows, the GPUs dropped)`` (module docstring)."""
    dropped = 0
    for _ in range(MAX_STEPS):
        rows = one_fewer(pick, rate, target, active, run, resize)
        meeting = [r.cand for r in rows if r.meets and r.cand is not None]
        if not meeting:
            return pick, rows, dropped
        best = min(meeting, key=lambda c: (c.hourly if c.hourly is not None else float("inf"),
                                           sum(c.gpus_by_kind().values())))
        dropped += sum(pick.gpus_by_kind().values()) - sum(best.gpus_by_kind().values())
        log(f"one GPU fewer still meets: {best.gpus_by_kind()}")
        pick = best
    return pick, one_fewer(pick, rate, target, active, run, resize), dropped
