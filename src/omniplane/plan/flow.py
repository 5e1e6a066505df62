"""Physical plans of a logical plan and their network-flow throughput bound (Algorithm 2, the
first phase), vectorised with numpy.

A physical plan fixes, per node instance, one executor config (TP x max batch) and a count
(at least one), and a routing vector. Node ``n`` with ``x_n`` executors of a config whose
per-request cost is ``s[t]`` (executor-seconds at full occupancy) carries the demand of every
type passing it: per unit of total rate, ``l_n = sum_t pi_t share[n, t] s[t]`` executor-seconds.
The plan's bottleneck rate is ``R_d = min_n x_n / l_n``.

**Redundancy (exact, Cornfigurator section 4.3).** A node with one executor more than its
demand at ``R_d`` needs (``(x_n - 1) / l_n >= R_d`` and ``x_n > 1``) is redundant: removing
the executor changes no flow. The non-redundant count vectors of a (config vector, routing
vector) *row* are exactly ``x_n(R) = max(1, ceil(R l_n))`` at the breakpoints
``R in {x / l_n}``, a chain growing with ``R``; those inside the GPU budget are its prefix up
to the row's top rate ``R_top``. So no redundant plan is ever built (``enumerated`` counts
them analytically, :func:`raw_count`).

**Flow domination (exact w.r.t. the Monte Carlo estimate).** Any plan's type-``t`` goodput is
at most ``alpha R_d pi_t``; a plan with ``R_d`` below the threshold (the best
``R x min_t attainment_t`` seen so far) is Pareto-dominated. Rows are visited in decreasing
``R_top`` and chain elements below the current threshold are never built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from omniplane.plan.costs import CostTable, NodeCosts
from omniplane.plan.logical import LogicalPlan
from omniplane.plan.routing import node_share
from omniplane.plan.space import CountRule

CHUNK = 4096  # config vectors per vectorised step
ROWS = 256  # rows turned into chain elements per step (then the Monte Carlo phase runs)


@dataclass
class Candidates:
    """Physical plans of one logical plan, as arrays (``C`` candidates, ``m`` node instances)."""

    lp: LogicalPlan
    costs: tuple[NodeCosts, ...]
    p: np.ndarray  # [V, T, W] routing vectors
    share: np.ndarray  # [V, m, T] fraction of each type's traffic through each node
    opt: np.ndarray  # [C, m] option index per node
    cnt: np.ndarray  # [C, m] executors per node
    vec: np.ndarray  # [C] routing vector index
    rate: np.ndarray  # [C] R_d, requests/s
    gpus: np.ndarray  # [C]

    def __len__(self) -> int:
        return len(self.rate)

    def take(self, idx: np.ndarray) -> Candidates:
        return Candidates(self.lp, self.costs, self.p, self.share, self.opt[idx], self.cnt[idx],
                          self.vec[idx], self.rate[idx], self.gpus[idx])


def raw_count(costs: tuple[NodeCosts, ...], n_vectors: int, budget: int) -> int:
    """Physical plans of a logical plan before any pruning: per node any config and any count
    >= 1, total GPUs <= budget, times the routing vectors (a generating-function product)."""
    poly = np.zeros(budget + 1, dtype=object)
    poly[0] = 1
    for nc in costs:
        f = np.zeros(budget + 1, dtype=object)
        for tp in nc.tp:
            for g in range(int(tp), budget + 1, int(tp)):
                f[g] += 1
        poly = np.convolve(poly, f)[: budget + 1]
    return int(sum(poly)) * n_vectors


class Expansion:
    """The non-redundant physical plans of one logical plan, produced lazily in decreasing
    ``R_top`` order (see the module docstring).

    ``allowed`` lists option-index arrays per node (several lists: their union); ``counts``
    fixes executor counts from the nodes' TP degrees (a baseline's rule) instead of the chain.
    """

    def __init__(self, lp: LogicalPlan, table: CostTable, p: np.ndarray, pi: np.ndarray, budget: int,
                 allowed: list[list[np.ndarray]] | None = None, counts: CountRule | None = None,
                 threshold: float = 0.0) -> None:
        self.costs = tuple(table.node(n) for n in lp.nodes)
        self.lp, self.p, self.budget, self.rule = lp, p, budget, counts
        self.share = node_share(lp, p)  # [V, m, T]
        self.demand = self.share * pi[None, None, :]
        sets = allowed or [[np.arange(len(nc.options)) for nc in self.costs]]
        rows: list[tuple[np.ndarray, ...]] = []
        for pick in sets:
            rows.extend(self._rows(pick, threshold))
        if rows:
            opt, vec, top, cnt = (np.concatenate(x) for x in zip(*rows, strict=True))
        else:
            m = len(self.costs)
            opt, vec, top, cnt = np.zeros((0, m), int), np.zeros(0, int), np.zeros(0), np.zeros((0, m), int)
        order = np.argsort(-top, kind="stable")
        self.opt, self.vec, self.top, self.cnt = opt[order], vec[order], top[order], cnt[order]

    def _rows(self, pick: list[np.ndarray], threshold: float) -> Iterator[tuple[np.ndarray, ...]]:
        """(options, routing vector, R_top, fixed counts) of every row that can reach the
        threshold; rows whose continuous bound ``N / sum_n tp_n l_n`` is below it are skipped."""
        m = len(self.costs)
        sizes = [len(x) for x in pick]
        total = int(np.prod(sizes)) if all(sizes) else 0
        for start in range(0, total, CHUNK):
            idx = np.unravel_index(np.arange(start, min(total, start + CHUNK)), sizes)
            opt = np.stack([pick[n][idx[n]] for n in range(m)], axis=1)
            tp, load = self._loads(opt)
            if self.rule is None:
                gpu_s = (load * tp[:, None, :]).sum(axis=2)  # [B, V]
                with np.errstate(divide="ignore"):
                    bound = np.where(gpu_s > 0, self.budget / gpu_s, np.inf)
                bi, vi = np.nonzero(bound >= threshold)
                if not len(bi):
                    continue
                top = top_rate(tp[bi], load[bi, vi][:, None, :], self.budget)[:, 0]
                ok = (top > 0) & (top >= threshold)
                bi, vi = bi[ok], vi[ok]
                yield opt[bi], vi, top[ok], np.zeros((len(bi), m), dtype=int)
            else:
                cnt = np.array([self.rule(tuple(int(x) for x in row), self.budget) or (0,) * m
                                for row in tp], dtype=int).reshape(len(opt), m)
                with np.errstate(divide="ignore"):
                    rate = np.where(load > 0, cnt[:, None, :] / load, np.inf).min(axis=2)
                ok = (cnt.min(axis=1) >= 1)[:, None] & ((cnt * tp).sum(axis=1) <= self.budget)[:, None]
                ok &= np.isfinite(rate) & (rate >= threshold)
                bi, vi = np.nonzero(ok)
                yield opt[bi], vi, rate[bi, vi], cnt[bi]

    def _loads(self, opt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = len(self.costs)
        tp = np.stack([self.costs[n].tp[opt[:, n]] for n in range(m)], axis=1)  # [B, m]
        load = np.empty((len(opt), self.demand.shape[0], m))
        for n in range(m):
            load[:, :, n] = self.costs[n].s_full[opt[:, n]] @ self.demand[:, n, :].T
        return tp, load

    @property
    def rows(self) -> int:
        return len(self.top)

    def candidates(self, threshold: Callable[[], float]) -> Iterator[Candidates]:
        """Chain elements with ``R_d >= threshold()`` in chunks of rows, best rows first; the
        threshold is read again before every chunk."""
        for start in range(0, len(self.top), ROWS):
            thr = threshold()
            sl = slice(start, start + ROWS)
            keep = np.nonzero(self.top[sl] >= thr)[0] + start
            if not len(keep):
                return
            yield self._elements(keep, thr)

    def _elements(self, rows: np.ndarray, thr: float) -> Candidates:
        opt, vec = self.opt[rows], self.vec[rows]
        tp, load = self._loads(opt)
        load = load[np.arange(len(rows)), vec]  # [S, m]
        if self.rule is not None:
            cnt = self.cnt[rows]
            return Candidates(self.lp, self.costs, self.p, self.share, opt, cnt, vec, self.top[rows],
                              (cnt * tp).sum(axis=1))
        m = len(self.costs)
        x = np.arange(1, self.budget + 1, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            brk = (x[None, None, :] / load[:, :, None]).reshape(len(rows), m * self.budget)
        brk = np.where(np.isfinite(brk), brk, np.inf)
        inside = (brk >= thr) & (brk <= self.top[rows][:, None] * (1 + 1e-12))
        ri, qi = np.nonzero(inside)
        r = brk[ri, qi]
        cnt = np.maximum(1, np.ceil(r[:, None] * load[ri] - 1e-9))
        cnt = np.where(np.isfinite(cnt), cnt, 1.0).astype(int)
        gpus = (cnt * tp[ri]).sum(axis=1)
        ok = gpus <= self.budget
        ri, r, cnt, gpus = ri[ok], r[ok], cnt[ok], gpus[ok]
        return Candidates(self.lp, self.costs, self.p, self.share, opt[ri], cnt, vec[ri], r, gpus)


def top_rate(tp: np.ndarray, load: np.ndarray, budget: int) -> np.ndarray:
    """``R_top[B, V]``: the largest breakpoint whose minimal counts fit the budget (0: none)."""
    lo = np.zeros(load.shape[:2])
    total = load.sum(axis=2)
    hi = np.where(total > 0, budget / np.maximum(total, 1e-300) * 1.000001 + 1e-9, 0.0)
    hi = np.maximum(hi, _fit_rate(tp, load, budget))
    for _ in range(48):  # G(R) = sum tp max(1, ceil(R l)) is non-decreasing in R
        mid = (lo + hi) / 2
        ok = _gpus(tp, load, mid) <= budget
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    with np.errstate(divide="ignore", invalid="ignore"):
        snapped = np.where(load > 0, np.floor(lo[..., None] * load + 1e-9) / load, 0.0).max(axis=2)
    fits = (tp.sum(axis=1) <= budget)[:, None]
    return np.where(fits, snapped, 0.0)


def _fit_rate(tp: np.ndarray, load: np.ndarray, budget: int) -> np.ndarray:
    """A rate at which the minimal counts certainly exceed the budget (bisection's upper end)."""
    with np.errstate(divide="ignore"):
        least = np.where(load > 0, load, np.inf).min(axis=2)
    return np.where(np.isfinite(least), (budget + 1) / np.where(np.isfinite(least), least, 1.0), 0.0)


def _gpus(tp: np.ndarray, load: np.ndarray, rate: np.ndarray) -> np.ndarray:
    need = np.maximum(1.0, np.ceil(rate[..., None] * load - 1e-9))
    return np.asarray((need * tp[:, None, :]).sum(axis=2))


def exhaustive(lp: LogicalPlan, table: CostTable, p: np.ndarray, pi: np.ndarray, budget: int) -> Candidates:
    """Every physical plan of a logical plan, redundant ones included: each config vector,
    every count vector with at least one executor per node inside the budget, every routing
    vector. Exponential: for checks on small instances only (tests, docs/plan.md)."""
    import itertools

    costs = tuple(table.node(n) for n in lp.nodes)
    share = node_share(lp, p)
    demand = share * pi[None, None, :]
    rows: list[tuple[list[int], list[int], int, float, int]] = []
    for opt in itertools.product(*[range(len(nc.options)) for nc in costs]):
        tps = [int(costs[n].tp[o]) for n, o in enumerate(opt)]
        ranges = [range(1, budget // tp + 1) for tp in tps]
        for cnt in itertools.product(*ranges):
            gpus = sum(c * t for c, t in zip(cnt, tps, strict=True))
            if gpus > budget:
                continue
            for v in range(len(p)):
                load = np.array([costs[n].s_full[o] @ demand[v, n] for n, o in enumerate(opt)])
                with np.errstate(divide="ignore"):
                    rate = float(np.min(np.where(load > 0, np.array(cnt) / load, np.inf)))
                if np.isfinite(rate):
                    rows.append((list(opt), list(cnt), v, rate, gpus))
    m = len(costs)
    if not rows:
        z = np.zeros((0, m), dtype=int)
        return Candidates(lp, costs, p, share, z, z, np.zeros(0, int), np.zeros(0), np.zeros(0, int))
    return Candidates(lp, costs, p, share, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
                      np.array([r[2] for r in rows]), np.array([r[3] for r in rows]),
                      np.array([r[4] for r in rows]))
