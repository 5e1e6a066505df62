"""Plan spaces: the full Algorithm 1 space, or a restriction of it (the baselines).

A restricted space fixes the logical plan(s) and may fix TP degrees per node and the executor
counts; everything else (max batch sizes, counts when not fixed, routing) goes through the
same flow, Monte Carlo and simulation phases as the planner (Cornfigurator section 6.1:
baselines are restricted versions of the plan space, evaluated by the same pipeline).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from omniplane.plan.disagg import Split
from omniplane.plan.logical import LogicalPlan

CountRule = Callable[[tuple[int, ...], int], tuple[int, ...] | None]
"""Fixed executor counts from the nodes' TP degrees and the budget (None: does not fit)."""


@dataclass(frozen=True)
class Space:
    """``logical`` None means every logical plan of Algorithm 1."""

    name: str
    description: str
    logical: tuple[LogicalPlan, ...] | None = None
    tp: Mapping[frozenset[str], tuple[int, ...]] = field(default_factory=dict)
    counts: CountRule | None = None
    approximation: str = ""
    split: Split | None = None  # the space plans a derived model (prefill/decode split)

    @property
    def full(self) -> bool:
        return self.logical is None


FULL = Space("planner", "every logical plan of Algorithm 1 (k_c, k_s), all executor configs")
