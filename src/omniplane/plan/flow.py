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
to the row's top rate ``R_top``. So no redundant plan is ever built (the raw space counts
them by formula, :mod:`omniplane.plan.order`).

**Threshold (exact w.r.t. the simulator).** A plan's simulated goodput is at most its offered
rate, ``alpha R_d`` times the sample's arrival factor; with ``thr`` the best simulated
goodput so far divided by that, no plan with ``R_d < thr`` can be selected: such rows and
chain elements are never built (the search passes ``thr``, docs/guides/plan.md "Search").
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from omniplane.plan.bounds import grid_bound
from omniplane.plan.costs import CostTable, NodeCosts
from omniplane.plan.logical import LogicalPlan
from omniplane.plan.routing import node_share
from omniplane.plan.space import CountRule

CHUNK = 4096  # rows per vectorised step
FRONTIER = 200_000  # partial rows held at once while enumerating (memory bound)


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
    """The non-redundant physical plans of one logical plan with ``R_d >= thr``.

    ``allowed[n]`` lists the option indices node instance ``n`` may take; ``counts`` fixes
    executor counts from the nodes' TP degrees (a baseline's rule) instead of the chain.

    Rows (a config vector and a routing vector) are enumerated node by node and pruned
    exactly against the budget: at rate ``thr`` node ``n`` with option ``o`` needs at least
    ``g[n, o] = tp_o max(1, ceil(thr l[n, o]))`` GPUs, so a partial row whose GPUs so far
    plus the cheapest remaining nodes' exceed ``N`` has no plan with ``R_d >= thr``.
    """

    def __init__(self, lp: LogicalPlan, table: CostTable, p: np.ndarray, pi: np.ndarray, budget: int,
                 allowed: list[np.ndarray], counts: CountRule | None = None) -> None:
        self.costs = tuple(table.node(n) for n in lp.nodes)
        self.lp, self.p, self.budget, self.rule = lp, p, budget, counts
        self.share = node_share(lp, p)  # [V, m, T]
        self.demand = self.share * pi[None, None, :]
        self.allowed = allowed
        self.tps = [self.costs[n].tp[a] for n, a in enumerate(allowed)]
        self.loads = [(self.costs[n].s_full[a] @ self.demand[:, n, :].T).T  # [V, O_n]
                      for n, a in enumerate(allowed)]
        self.rows_evaluated = 0  # rows whose exact R_top was computed

    @property
    def n_vectors(self) -> int:
        return int(self.p.shape[0])

    def bound(self) -> float:
        """The largest ``R_d`` of any plan of this expansion (exact over configs and counts
        for each routing vector; :func:`omniplane.plan.bounds.grid_bound`)."""
        if self.rule is not None:
            return float("inf")
        return float(grid_bound(self.loads, self.tps, self.budget).max(initial=0.0))

    def rows(self, thr: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(opt [B, m], vec [B], top [B], cnt [B, m])`` of every row with ``R_top >= thr``,
        best ``R_top`` first (``cnt`` is the fixed counts of a count rule, else zeros)."""
        m = len(self.costs)
        parts = list(self._rule_rows(thr) if self.rule is not None else self._chain_rows(thr))
        if not parts:
            return np.zeros((0, m), int), np.zeros(0, int), np.zeros(0), np.zeros((0, m), int)
        opt, vec, top, cnt = (np.concatenate(x) for x in zip(*parts, strict=True))
        order = np.argsort(-top, kind="stable")
        return opt[order], vec[order], top[order], cnt[order]

    def _chain_rows(self, thr: float) -> Iterator[tuple[np.ndarray, ...]]:
        m, budget = len(self.costs), self.budget
        need = [tp[None, :] * np.maximum(1.0, np.ceil(thr * ld - 1e-9))
                for ld, tp in zip(self.loads, self.tps, strict=True)]
        least = np.stack([g.min(axis=1) for g in need], axis=1)  # [V, m]
        rest = np.concatenate([np.cumsum(least[:, ::-1], axis=1)[:, ::-1][:, 1:], np.zeros((len(least), 1))],
                              axis=1)  # [V, m]: cheapest GPUs of the nodes after n
        start = np.nonzero(least.sum(axis=1) <= budget)[0]
        stack: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = [
            (0, start, np.zeros(len(start)), np.zeros((len(start), 0), dtype=int))]
        while stack:
            n, vec, used, opts = stack.pop()
            if n == m:
                yield from self._tops(opts, vec, thr)
                continue
            ok = used[:, None] + need[n][vec] + rest[vec, n][:, None] <= budget + 1e-9
            ri, oi = np.nonzero(ok)
            if not len(ri):
                continue
            vec2 = vec[ri]
            nxt = (n + 1, vec2, used[ri] + need[n][vec2, oi], np.concatenate([opts[ri], oi[:, None]], axis=1))
            if len(ri) > FRONTIER and n + 1 < m:
                for part in np.array_split(np.arange(len(ri)), math.ceil(len(ri) / FRONTIER)):
                    stack.append((n + 1, nxt[1][part], nxt[2][part], nxt[3][part]))
            else:
                stack.append(nxt)

    def _tops(self, local: np.ndarray, vec: np.ndarray, thr: float) -> Iterator[tuple[np.ndarray, ...]]:
        m = len(self.costs)
        for start in range(0, len(vec), CHUNK):
            lo, v = local[start: start + CHUNK], vec[start: start + CHUNK]
            tp = np.stack([self.tps[n][lo[:, n]] for n in range(m)], axis=1)
            load = np.stack([self.loads[n][v, lo[:, n]] for n in range(m)], axis=1)
            top = top_rate(tp, load[:, None, :], self.budget)[:, 0]
            self.rows_evaluated += len(v)
            ok = (top > 0) & (top >= thr)
            opt = np.stack([self.allowed[n][lo[ok, n]] for n in range(m)], axis=1)
            yield opt, v[ok], top[ok], np.zeros((int(ok.sum()), m), dtype=int)

    def _rule_rows(self, thr: float) -> Iterator[tuple[np.ndarray, ...]]:
        assert self.rule is not None
        m = len(self.costs)
        sizes = [len(a) for a in self.allowed]
        total = int(np.prod(sizes)) if all(sizes) else 0
        for start in range(0, total, CHUNK):
            idx = np.unravel_index(np.arange(start, min(total, start + CHUNK)), sizes)
            tp = np.stack([self.tps[n][idx[n]] for n in range(m)], axis=1)
            load = np.stack([self.loads[n][:, idx[n]].T for n in range(m)], axis=2)  # [B, V, m]
            cnt = np.array([self.rule(tuple(int(x) for x in row), self.budget) or (0,) * m
                            for row in tp], dtype=int).reshape(len(tp), m)
            with np.errstate(divide="ignore"):
                rate = np.where(load > 0, cnt[:, None, :] / load, np.inf).min(axis=2)
            ok = (cnt.min(axis=1) >= 1)[:, None] & ((cnt * tp).sum(axis=1) <= self.budget)[:, None]
            ok &= np.isfinite(rate) & (rate >= thr)
            self.rows_evaluated += int(np.prod(rate.shape))
            bi, vi = np.nonzero(ok)
            opt = np.stack([self.allowed[n][idx[n][bi]] for n in range(m)], axis=1)
            yield opt, vi, rate[bi, vi], cnt[bi]

    def elements(self, opt: np.ndarray, vec: np.ndarray, top: np.ndarray, cnt: np.ndarray,
                 thr: float) -> Candidates:
        """The chain elements of these rows with ``R_d >= thr`` (a count rule: the row itself)."""
        m = len(self.costs)
        tp = np.stack([self.costs[n].tp[opt[:, n]] for n in range(m)], axis=1)
        if self.rule is not None:
            return Candidates(self.lp, self.costs, self.p, self.share, opt, cnt, vec, top,
                              (cnt * tp).sum(axis=1))
        load = np.stack([np.einsum("bt,bt->b", self.costs[n].s_full[opt[:, n]], self.demand[vec, n, :])
                         for n in range(m)], axis=1)  # [S, m]
        # breakpoints x / l inside [thr, top]: x from ceil(thr l) to floor(top l) per row and node
        with np.errstate(invalid="ignore"):
            lo = np.where(load > 0, np.maximum(1.0, np.ceil(thr * load - 1e-9)), 1.0)
            hi = np.where(load > 0, np.floor(top[:, None] * (1 + 1e-12) * load + 1e-9), 0.0)
        n_x = np.maximum(0, hi - lo + 1).astype(int)  # [S, m]
        ri = np.repeat(np.repeat(np.arange(len(opt)), m), n_x.ravel())
        ni = np.repeat(np.tile(np.arange(m), len(opt)), n_x.ravel())
        offsets = np.arange(len(ri)) - np.repeat(np.cumsum(n_x.ravel()) - n_x.ravel(), n_x.ravel())
        x = lo[ri, ni] + offsets
        r = x / load[ri, ni]
        # one plan per distinct (row, rate): two nodes may share a breakpoint
        key = np.stack([ri.astype(float), r], axis=1)
        _, first = np.unique(key, axis=0, return_index=True)
        ri, r = ri[first], r[first]
        cnts = np.maximum(1, np.ceil(r[:, None] * load[ri] - 1e-9)).astype(int)
        gpus = (cnts * tp[ri]).sum(axis=1)
        ok = (gpus <= self.budget) & (r >= thr)
        ri, r, cnts, gpus = ri[ok], r[ok], cnts[ok], gpus[ok]
        return Candidates(self.lp, self.costs, self.p, self.share, opt[ri], cnts, vec[ri], r, gpus)


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
    vector. Exponential: for checks on small instances only (tests, bench/bench_optimality.py)."""
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
