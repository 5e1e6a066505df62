"""What the search keeps and reports: Monte Carlo-evaluated blocks of candidates, simulated
plans, the counts of each phase and the search's statistics (``omniplane.plan.search``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from omniplane.plan.explain import Ledger
from omniplane.plan.flow import Candidates
from omniplane.plan.refine import SimOutcome
from omniplane.spec import PlanSpec


@dataclass
class Block:
    """Monte Carlo-evaluated candidates of one logical plan."""

    cands: Candidates
    goodput: np.ndarray  # [C, T]
    attain: np.ndarray  # [C, T]

    def take(self, idx: np.ndarray) -> Block:
        return Block(self.cands.take(idx), self.goodput[idx], self.attain[idx])


@dataclass
class Simulated:
    """One candidate run through the simulator: what the search found (``block``, ``i``) and,
    once the pipeline has emitted it, its plan file (``spec``). The one record of a simulated
    plan for the search, the pipeline and the comparison."""

    block: Block
    i: int
    outcome: SimOutcome  # simulated at alpha x R_d
    logical: str
    rank: int  # expansion rank of its logical plan (1-based)
    spec: PlanSpec | None = None  # the emitted plan (set by the pipeline)

    @property
    def rate(self) -> float:
        """R_d, requests/s (flow bound)."""
        return float(self.block.cands.rate[self.i])

    @property
    def estimate(self) -> np.ndarray:
        """[T] flow + Monte Carlo goodput estimate at alpha x R_d."""
        return np.asarray(self.block.goodput[self.i])

    @property
    def error(self) -> float:
        """Relative error of the estimate's total goodput against the simulator's."""
        sim = float(self.outcome.goodput.sum())
        est = float(self.estimate.sum())
        return (est - sim) / sim if sim > 0 else (0.0 if est == 0 else float("inf"))

    @property
    def plan(self) -> PlanSpec:
        if self.spec is None:
            raise ValueError("this simulated candidate has no emitted plan yet")
        return self.spec


@dataclass
class Cloud:
    """Goodput vectors of evaluated plans by the phase that pruned them (paper Figure 7)."""

    rate: list[np.ndarray] = field(default_factory=list)
    goodput: list[np.ndarray] = field(default_factory=list)
    phase: list[str] = field(default_factory=list)

    def add(self, rate: np.ndarray, goodput: np.ndarray, phase: str) -> None:
        if len(rate):
            self.rate.append(rate)
            self.goodput.append(goodput)
            self.phase.extend([phase] * len(rate))


@dataclass
class Counts:
    """How many plans each phase saw (docs/guides/plan.md, "Counts")."""

    # Algorithm 1's physical plans read literally (one config per node, a node's executors pooled,
    # per-type routing over paths on the grid), counted by formula: not the paper's ~5e8
    # (docs/guides/plan.md "Counts")
    raw_space: float = 0.0
    built: int = 0  # physical plans built: rows whose flow bound was computed + further chain elements
    flow: int = 0  # physical plans at or above the threshold after the flow phase (non-redundant)
    monte_carlo: int = 0  # physical plans evaluated by Monte Carlo over every sampled request
    simulated: int = 0  # physical plans run through the simulator

    def to_json(self) -> dict[str, float]:
        return {"raw_space": self.raw_space, "built": self.built, "flow": self.flow,
                "monte_carlo": self.monte_carlo, "simulated": self.simulated}


@dataclass
class SearchStats:
    logical_total: int = 0  # logical plans in the space (counted)
    subplans: int = 0
    logical_expanded: int = 0
    logical_bounded: int = 0  # skipped: bound below the incumbent
    logical_infeasible: int = 0  # the minimum GPUs do not fit
    tied_routing: int = 0  # expanded with routing splits tied across types
    grouped: int = 0  # (plan, node) pairs tried with two executor groups
    estimate_bounded_rows: int = 0  # rows whose plans were not built: the row's estimate bound is too low
    estimate_bounded: int = 0  # plans not estimated: their estimate bound is below the estimate floor
    reserve_simulated: int = 0  # estimate-dropped plans simulated with spare --max-simulated budget
    threshold: float = 0.0  # final R_d threshold
    incumbent: float = 0.0  # best simulated score
    stopped: str = "exhausted"  # why the expansion ended: bound | exhausted | time budget
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("enumerate", "flow", "monte_carlo", "simulate"), 0.0))


@dataclass
class SearchResult:
    simulated: list[Simulated]
    pool: list[Block]  # Pareto survivors on the estimate whose bound beats the final incumbent
    counts: Counts
    stats: SearchStats
    ledger: Ledger
    cloud: Cloud


def concat(blocks: list[Block]) -> Block:
    c0 = blocks[0].cands

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(b.cands, name) for b in blocks])

    cands = Candidates(c0.lp, c0.costs, c0.p, c0.share, cat("opt"), cat("cnt"), cat("vec"), cat("rate"),
                       cat("gpus"))
    good = np.concatenate([b.goodput for b in blocks])
    return Block(cands, good, np.concatenate([b.attain for b in blocks]))
