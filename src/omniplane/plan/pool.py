"""What the search keeps and reports: Monte Carlo-evaluated blocks of candidates, the pool of
survivors and its reserve, simulated plans, the counts of each phase and the search's
statistics (``omniplane.plan.search``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from omniplane.plan.explain import Ledger
from omniplane.plan.flow import Candidates
from omniplane.plan.refine import SimOutcome
from omniplane.plan.select import Score, pareto_front
from omniplane.spec import PlanSpec

CLOUD_SAMPLE = 200  # Monte Carlo-pruned plans per block kept for the pruning figure
RESERVE = 8  # estimate-dropped plans kept per logical plan for spare simulation budget (assumption)
PARETO_EVERY = 5_000  # pool rows before the exact and Pareto pruning run (the same rules as at the end)


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


@dataclass
class Pruned:
    """Rows one pruning of the pool dropped, by rule."""

    bounded: int  # flow rate below the threshold
    low: int  # estimate below the estimate floor
    dominated: int  # Pareto-dominated on the estimate within its logical plan


class Pool:
    """The Monte Carlo-estimated plans the search keeps: per logical plan, the Pareto front on
    the estimate (``blocks``, the survivors) and the reserve (its ``RESERVE`` best plans by
    estimate among those the estimate rules dropped, which spare ``max_simulated`` budget
    simulates after the survivors). ``cloud``: where the Pareto-dominated plans go for the
    pruning figure (None: nowhere)."""

    def __init__(self, score: Score, pi: np.ndarray, cloud: Cloud | None) -> None:
        self.score, self.pi, self.cloud = score, pi, cloud
        self.blocks: list[Block] = []
        self.reserve: dict[int, Block] = {}  # id(logical plan) -> its best estimate-dropped rows
        self._settled = 0  # pool rows after the last periodic pruning

    def size(self) -> int:
        return sum(len(b.goodput) for b in self.blocks)

    def add(self, block: Block) -> bool:
        """Add ``block``; True when the pool has grown enough to be pruned (then :meth:`settle`)."""
        self.blocks.append(block)
        return self.size() > max(PARETO_EVERY, 2 * self._settled)

    def settle(self) -> None:
        self._settled = self.size()

    def prune(self, thr: float, floor: float) -> Pruned:
        """Drop rows below the threshold ``thr`` (their bound) or whose estimate is below the
        estimate floor ``floor``, then keep each logical plan's Pareto front on the estimate;
        the rows above ``thr`` that were dropped go to the reserve."""
        by_lp: dict[int, list[Block]] = {}
        bounded = low = 0
        for b in self.blocks:
            ok = b.cands.rate >= thr
            bounded += int((~ok).sum())
            est = self.score(b.goodput, self.pi)
            good = ok & (est >= floor)
            low += int((ok & ~good).sum())
            if good.any():
                by_lp.setdefault(id(b.cands.lp), []).append(b if good.all() else b.take(np.nonzero(good)[0]))
            if (ok & ~good).any():
                self.keep(b.take(np.nonzero(ok & ~good)[0]))
        out = []
        dominated = 0
        for blocks in by_lp.values():
            merged = blocks[0] if len(blocks) == 1 else concat(blocks)
            front = pareto_front(merged.goodput)
            dominated += len(merged.goodput) - len(front)
            lost = np.setdiff1d(np.arange(len(merged.goodput)), front)
            if len(lost):
                self.keep(merged.take(lost))
            if self.cloud is not None:
                self.cloud.add(merged.cands.rate[lost[:CLOUD_SAMPLE]], merged.goodput[lost[:CLOUD_SAMPLE]],
                               "monte_carlo")
            out.append(merged.take(front))
        self.blocks = out
        return Pruned(bounded, low, dominated)

    def keep(self, block: Block) -> None:
        """Add estimate-dropped rows to their logical plan's reserve (its ``RESERVE`` best)."""
        key = id(block.cands.lp)
        old = self.reserve.get(key)
        merged = block if old is None else concat([old, block])
        if len(merged.goodput) > RESERVE:
            merged = merged.take(np.argsort(-self.score(merged.goodput, self.pi), kind="stable")[:RESERVE])
        self.reserve[key] = merged
