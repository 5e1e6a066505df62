"""The coarse phases of the pipeline over a plan space: enumerate logical plans in priority
order, expand each into non-redundant physical plans (flow), estimate their goodput (Monte
Carlo) and keep the Pareto front of per-type goodput vectors.

The flow-domination threshold ``R*`` (the best ``R_d x min_t attainment_t`` seen) only grows,
so candidates and whole logical plans whose upper bound falls below it are skipped exactly.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from omniplane.plan.bounds import SubplanBound, pair_bounds, subplan_bound
from omniplane.plan.costs import CostTable
from omniplane.plan.enumerate import compound_subplans, simple_subplans
from omniplane.plan.flow import Candidates, Expansion, raw_count
from omniplane.plan.logical import LogicalPlan, Subplan, compose
from omniplane.plan.montecarlo import evaluate
from omniplane.plan.options import PlannerOptions
from omniplane.plan.problem import Problem
from omniplane.plan.progress import NO_PROGRESS, Progress
from omniplane.plan.routing import routing_vectors
from omniplane.plan.select import Score, pareto_front
from omniplane.plan.space import Space

MC_CHUNK = 2048  # candidates per vectorised Monte Carlo step
CLOUD_SAMPLE = 200  # candidates per logical plan kept (or evaluated) for the pruning figure
POOL = 1500  # Monte Carlo results kept for the final Pareto pruning, best selection score first


@dataclass
class Block:
    """Monte Carlo-evaluated candidates of one logical plan."""

    cands: Candidates
    goodput: np.ndarray  # [C, T]
    attain: np.ndarray  # [C, T]


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
class SearchStats:
    logical_total: int = 0  # logical plans in the space (counted)
    subplans: int = 0
    logical_expanded: int = 0
    logical_skipped: int = 0  # upper bound below the threshold
    cap_hit: bool = False
    guarded: int = 0  # logical plans expanded under the config guard
    raw: float = 0.0  # physical plans of the expanded logical plans, counted (paper's space)
    raw_total: float = 0.0  # the whole space, counted
    after_flow: int = 0
    mc_evaluated: int = 0
    threshold: float = 0.0
    seconds: dict[str, float] = field(default_factory=lambda: {"enumerate": 0.0, "flow": 0.0,
                                                                "monte_carlo": 0.0})


@dataclass
class SearchResult:
    front: list[Block]  # Pareto-optimal candidates by Monte Carlo goodput
    pool: list[Block]  # every Monte Carlo result kept (the best POOL by selection score)
    stats: SearchStats
    cloud: Cloud
    ranks: dict[str, int] = field(default_factory=dict)  # logical plan -> its expansion rank (1-based)


class Search:
    def __init__(self, problem: Problem, table: CostTable, space: Space, options: PlannerOptions,
                 slo_s: np.ndarray, transfer_s: float, score: Score, progress: Progress = NO_PROGRESS,
                 cloud: bool = False) -> None:
        self.table = table
        self.space = space
        self.opt = options
        self.slo = slo_s
        self.transfer = transfer_s
        self.score = score
        self.progress = progress
        self.want_cloud = cloud
        self.pi = problem.pi()
        self.budget = problem.gpus
        self.stats = SearchStats()
        self.cloud = Cloud()
        self.front: list[Block] = []
        self.ranks: dict[str, int] = {}

    # ---- main loop ------------------------------------------------------------------------
    def run(self) -> SearchResult:
        t0 = time.perf_counter()
        order = self._ordered()
        first = next(order, None)
        self.stats.seconds["enumerate"] += time.perf_counter() - t0
        self.progress.start(f"{self.space.name}: flow + Monte Carlo",
                            min(self.stats.logical_total, self.opt.max_logical))
        pending = [] if first is None else [first]
        for ub, lp in itertools.chain(pending, order):
            if self.stats.logical_expanded >= self.opt.max_logical:
                self.stats.cap_hit = True
                break
            if ub < self.stats.threshold:
                self.stats.logical_skipped += 1
                continue
            self._expand(lp)
            self.progress.advance(1, f"{self.stats.after_flow:,} after flow, R* {self.stats.threshold:.2f}/s")
        self.progress.end()
        t1 = time.perf_counter()
        pool = self.front
        front = self.finish()
        self.stats.seconds["monte_carlo"] += time.perf_counter() - t1
        return SearchResult(front, pool, self.stats, self.cloud, self.ranks)

    def _expand(self, lp: LogicalPlan) -> None:
        st = self.stats
        st.logical_expanded += 1
        self.ranks[lp.describe()] = st.logical_expanded
        t0 = time.perf_counter()
        vecs = routing_vectors(lp, self.opt.grid_steps, self.opt.max_routings)
        exp = Expansion(lp, self.table, vecs, self.pi, self.budget, self._option_sets(lp, len(vecs)),
                        self.space.counts, st.threshold)
        st.raw += raw_count(exp.costs, _type_routings(lp, self.opt.grid_steps), self.budget)
        st.seconds["flow"] += time.perf_counter() - t0
        kept: list[Block] = []
        chunks = exp.candidates(lambda: st.threshold)
        while True:
            t1 = time.perf_counter()
            cands = next(chunks, None)
            t2 = time.perf_counter()
            st.seconds["flow"] += t2 - t1
            if cands is None:
                break
            st.after_flow += len(cands)
            kept.extend(self._monte_carlo(cands))
            st.seconds["monte_carlo"] += time.perf_counter() - t2
        if kept:
            self._merge(kept)
        if self.want_cloud:
            self._cloud_flow(exp)

    def _monte_carlo(self, cands: Candidates) -> list[Block]:
        st = self.stats
        order = np.argsort(-cands.rate, kind="stable")
        kept: list[Block] = []
        active = self.pi > 0
        for k in range(0, len(order), MC_CHUNK):
            idx = order[k: k + MC_CHUNK]
            idx = idx[cands.rate[idx] >= st.threshold]
            if not len(idx):
                break
            sub = cands.take(idx)
            good, att = evaluate(sub, self.table, self.pi, self.slo, self.opt.alpha, self.transfer)
            st.mc_evaluated += len(idx)
            best = float((sub.rate * att[:, active].min(axis=1)).max())
            st.threshold = max(st.threshold, (1 - self.opt.mc_tolerance) * best)
            kept.append(Block(sub, good, att))
        return kept

    def _merge(self, blocks: list[Block]) -> None:
        """Add Monte Carlo results to the pool; past ``2 x POOL`` keep the ``POOL`` best by
        the selection score (the Pareto pruning itself runs once, in :meth:`finish`)."""
        self.front.extend(blocks)
        size = sum(len(b.goodput) for b in self.front)
        if size > 2 * POOL:
            self.front = self._trim(self.front, POOL)

    def _trim(self, blocks: list[Block], keep_n: int) -> list[Block]:
        score = np.concatenate([self.score(b.goodput, self.pi) for b in blocks])
        keep = np.zeros(len(score), dtype=bool)
        keep[np.argsort(-score, kind="stable")[:keep_n]] = True
        return self._keep(blocks, keep)

    def finish(self) -> list[Block]:
        """The Pareto front (with the Monte Carlo tolerance) of the pool."""
        if not self.front:
            return []
        good = np.concatenate([b.goodput for b in self.front])
        front = pareto_front(good, self.opt.mc_tolerance)
        return self._trim(self.front, len(good)) if len(front) == len(good) else self._select(front)

    def _select(self, rows: np.ndarray) -> list[Block]:
        keep = np.zeros(sum(len(b.goodput) for b in self.front), dtype=bool)
        keep[rows] = True
        return self._keep(self.front, keep)

    def _keep(self, blocks: list[Block], keep: np.ndarray) -> list[Block]:
        """The rows of ``blocks`` (concatenated) that ``keep`` marks; a sample of the others
        goes to the pruning cloud (Figure 7)."""
        out, base = [], 0
        for b in blocks:
            mine = keep[base: base + len(b.goodput)]
            base += len(b.goodput)
            if self.want_cloud:
                lost = np.nonzero(~mine)[0][:CLOUD_SAMPLE]
                self.cloud.add(b.cands.rate[lost], b.goodput[lost], "monte_carlo")
            idx = np.nonzero(mine)[0]
            if len(idx):
                out.append(Block(b.cands.take(idx), b.goodput[idx], b.attain[idx]))
        return out

    def _cloud_flow(self, exp: Expansion) -> None:
        """Monte Carlo goodput of a sample of the plans flow pruning removed (for Figure 7)."""
        low = np.nonzero(exp.top < self.stats.threshold)[0]
        if not len(low):
            return
        rng = np.random.default_rng(self.stats.logical_expanded)
        pick = np.sort(rng.choice(low, size=min(CLOUD_SAMPLE, len(low)), replace=False))
        sub = exp._elements(pick, 0.0)
        top = np.isin(sub.rate, exp.top[pick])
        sub = sub.take(np.nonzero(top)[0])
        if len(sub):
            good, _ = evaluate(sub, self.table, self.pi, self.slo, self.opt.alpha, self.transfer)
            self.cloud.add(sub.rate, good, "flow")

    def _option_sets(self, lp: LogicalPlan, n_vecs: int) -> list[list[np.ndarray]]:
        """Configs each node may take. When the product of config choices and routing vectors
        exceeds ``max_configs``, only the bottleneck needs every max batch: each node in turn
        keeps all its configs while the others keep, per TP degree, the config with the most
        capacity for the mix (docs/plan.md, "Config guard")."""
        base = []
        for n in lp.nodes:
            nc = self.table.node(n)
            tps = self.space.tp.get(n)
            base.append(np.array([i for i, (tp, _) in enumerate(nc.options) if tps is None or tp in tps],
                                 dtype=int))
        if int(np.prod([len(b) for b in base])) * n_vecs <= self.opt.max_configs:
            return [base]
        self.stats.guarded += 1
        best = []
        for n, allowed in zip(lp.nodes, base, strict=True):
            nc = self.table.node(n)
            load = nc.s_full[allowed] @ self.pi
            keep: dict[int, int] = {}
            for i, o in enumerate(allowed):
                tp = nc.options[o][0]
                if tp not in keep or load[i] < load[keep[tp]]:
                    keep[tp] = i
            best.append(np.array(sorted(allowed[i] for i in keep.values()), dtype=int))
        return [[base[k] if k == b else best[k] for k in range(len(base))] for b in range(len(base))]

    # ---- logical plans in priority order ----------------------------------------------------
    def _ordered(self) -> Iterator[tuple[float, LogicalPlan]]:
        n_types = len(self.pi)
        if self.space.logical is not None:
            self.stats.logical_total = len(self.space.logical)
            for lp in self.space.logical:
                yield math.inf, lp
            return
        simple = simple_subplans(self.table.model)
        subs = simple + compound_subplans(self.table.model, simple, self.opt.k_c)
        self.stats.subplans = len(subs)
        bounds = [subplan_bound(s, self.table, self.pi, self.budget) for s in subs]
        full = (1 << n_types) - 1
        masks = np.array([sum(1 << t for t in s.covered) for s in subs], dtype=np.int64)
        heap: list[tuple[float, int, int, float]] = []  # (-priority, i, j, ub); j = -1: single
        for i, b in enumerate(bounds):
            if masks[i] == full and b.priority > 0:
                heap.append((-b.priority, i, -1, b.ub))
        total = int((masks == full).sum())
        if self.opt.k_s >= 2:  # side by side: simple subplans only (docs/plan.md, "Logical plans")
            n = len(simple)
            total += self._pairs(subs[:n], bounds[:n], masks[:n], full, heap)
        self.stats.logical_total = total
        heapq.heapify(heap)
        while heap:
            _, i, j, ub = heapq.heappop(heap)
            parts: tuple[Subplan, ...] = (subs[i],) if j < 0 else (subs[i], subs[j])
            yield ub, compose(parts, n_types)

    def _pairs(self, subs: list[Subplan], bounds: list[SubplanBound], masks: np.ndarray, full: int,
               heap: list[tuple[float, int, int, float]]) -> int:
        """Push the best side-by-side pairs (by priority) onto the heap; return how many pairs
        cover every type. Only the ``max_logical`` best pairs can ever be expanded."""
        count = 0
        best: list[tuple[float, int, int, float]] = []
        for i in range(len(subs)):
            js = np.arange(i, len(subs))
            cover = (masks[i] | masks[js]) == full
            js = js[cover]
            count += len(js)
            if not len(js):
                continue
            ub, prio = pair_bounds(bounds[i], [bounds[j] for j in js], self.pi, self.budget)
            top = np.argsort(-prio)[: self.opt.max_logical]
            for k in top:
                if prio[k] > 0:
                    item = (-float(prio[k]), i, int(js[k]), float(ub[k]))
                    if len(best) < self.opt.max_logical:
                        heapq.heappush(best, (-item[0], i, int(js[k]), item[3]))
                    elif -item[0] > best[0][0]:
                        heapq.heapreplace(best, (-item[0], i, int(js[k]), item[3]))
        heap.extend((-p, i, j, ub) for p, i, j, ub in best)
        return count


def _type_routings(lp: LogicalPlan, steps: int) -> int:
    """Routing vectors with each type routed on its own (the paper's space, for counting)."""
    out = 1
    for rs in lp.routes:
        if len(rs) > 1:
            out *= math.comb(steps + len(rs) - 1, len(rs) - 1)
    return out
