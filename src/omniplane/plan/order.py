"""Logical plans of Algorithm 1 in decreasing order of an admissible bound on their flow rate,
drawn lazily, and the size of the raw plan space counted (never built).

The logical plans are every subplan (simple or compound) that covers all active types, and
every unordered pair of subplans (a subplan may appear twice) whose coverage is all active
types (``k_s = 2``; Cornfigurator section 4.2). For Qwen3-Omni that is about 1.9 million
plans: each gets a cheap vectorised bound (:func:`omniplane.plan.bounds.loose_single`,
:func:`~omniplane.plan.bounds.loose_pairs`); when a plan reaches the top of the queue its
bound is tightened once (:func:`~omniplane.plan.bounds.grid_bound`, over the routing vectors
its expansion will use) and it is queued again: a best-first search with lazily tightened
bounds, so only plans whose loose bound beats the incumbent are ever looked at closely.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from omniplane.plan.bounds import (
    THETA_LEVELS,
    PairSide,
    SubplanAgg,
    loose_pairs,
    loose_single,
    node_floor,
    subplan_agg,
)
from omniplane.plan.costs import CostTable
from omniplane.plan.logical import LogicalPlan, Subplan, compose
from omniplane.plan.space import Space

PAIR_BLOCK = 64  # subplans whose pairs are bounded in one vectorised step


@dataclass(frozen=True)
class Entry:
    """One logical plan in the queue: its bound, whether that bound is tightened, and the
    subplan indices (``j = -1``: a single subplan)."""

    bound: float
    tight: bool
    i: int
    j: int


class LogicalOrder:
    """The logical plans of a space, best bound first (see the module docstring)."""

    def __init__(self, table: CostTable, space: Space, pi: np.ndarray, budget: int, k_c: int, k_s: int,
                 steps: int, compose_compound: bool = False) -> None:
        self.table, self.space, self.pi, self.budget, self.steps = table, space, pi, budget, steps
        self.n_types = len(pi)
        active = pi > 0
        self.full = int(sum(1 << t for t in range(self.n_types) if active[t]))
        if space.logical is not None:
            self.subs: list[Subplan] = []
            self.fixed: list[LogicalPlan] = list(space.logical)
        else:
            self.subs = table.subplans(k_c)
            self.fixed = []
        self.n_simple = sum(1 for sp in self.subs if not sp.compound)  # simple subplans come first
        self.compose_compound = compose_compound
        self.skipped_pairs = 0  # covering pairs with a compound side, not enumerated
        self.k_s = k_s
        self.masks = np.array([sum(1 << t for t in s.covered) & self.full for s in self.subs], dtype=np.int64)
        # aggregates of the subplans a logical plan can use: every one when compound subplans
        # are composed, else the simple ones and the compound ones that cover every type alone
        used = [k < self.n_simple or compose_compound or int(self.masks[k]) == self.full
                for k in range(len(self.subs))]
        distinct = {n for s, use in zip(self.subs, used, strict=True) if use for n in s.nodes}
        floors = {n: node_floor(table.node(n), self._allowed(n)) for n in distinct}
        k = 1 + len(THETA_LEVELS)
        unused = SubplanAgg(np.inf, np.full(self.n_types, np.inf), True, np.zeros(0), np.zeros(0),
                            np.full(k, np.inf), np.full((k, self.n_types), np.inf))
        self.aggs = [subplan_agg(s, [floors[n] for n in s.nodes], pi, budget) if use else unused
                     for s, use in zip(self.subs, used, strict=True)]
        if self.aggs:
            self.sides = PairSide(np.array([a.min_gpus for a in self.aggs]),
                                  np.stack([a.route_cost for a in self.aggs]),
                                  np.stack([a.theta_min for a in self.aggs]),
                                  np.stack([a.theta_cost for a in self.aggs]))
        self._build()

    def _allowed(self, node: frozenset[str]) -> np.ndarray:
        nc = self.table.node(node)
        tps = self.space.tp.get(node)
        return np.array([k for k, (tp, _) in enumerate(nc.options) if tps is None or tp in tps], dtype=int)

    # ---- the queue -----------------------------------------------------------------------------
    def _build(self) -> None:
        """Loose bounds of every logical plan, as arrays sorted by bound (best first)."""
        if self.fixed:
            self.i = np.arange(len(self.fixed))
            self.j = np.full(len(self.fixed), -2)  # -2: a fixed logical plan of the space
            self.ub = np.full(len(self.fixed), np.inf)
            self.total = len(self.fixed)
            self.infeasible = 0
            return
        singles = np.nonzero(self.masks == self.full)[0]
        ii = [singles]
        jj = [np.full(len(singles), -1)]
        ub = [np.array([loose_single(self.aggs[k], self.pi, self.budget) for k in singles])]
        for i, js in self._pairs():
            ii.append(i)
            jj.append(js)
            sd = self.sides
            ub.append(loose_pairs(PairSide(sd.mins[i], sd.cost[i], sd.t_min[i], sd.t_cost[i]),
                                  PairSide(sd.mins[js], sd.cost[js], sd.t_min[js], sd.t_cost[js]),
                                  self.pi, self.budget))
        i_all, j_all, ub_all = np.concatenate(ii), np.concatenate(jj), np.concatenate(ub)
        self.total = len(ub_all)
        if self.k_s >= 2 and not self.compose_compound:
            self.skipped_pairs = self._covering_pairs(len(self.subs)) - self._covering_pairs(self.n_simple)
        keep = np.nonzero(ub_all > 0)[0]  # the minimum GPUs fit the budget
        self.infeasible = self.total - len(keep)
        order = keep[np.argsort(-ub_all[keep])]
        self.i, self.j, self.ub = i_all[order], j_all[order], ub_all[order]

    def _pairs(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Index arrays ``(i, j)``, ``i <= j``, of the pairs of subplans covering every active
        type, in blocks (simple subplans only unless ``compose_compound``)."""
        if self.k_s < 2:
            return
        n = len(self.subs) if self.compose_compound else self.n_simple
        cols = np.arange(n)
        for lo in range(0, n, PAIR_BLOCK):
            rows = np.arange(lo, min(n, lo + PAIR_BLOCK))
            cover = (self.masks[rows, None] | self.masks[None, :n]) == self.full
            ok = cover & (cols[None, :] >= rows[:, None])
            ri, js = np.nonzero(ok)
            if len(ri):
                yield rows[ri], js

    def _covering_pairs(self, n: int) -> int:
        masks = self.masks[:n]
        values, counts = np.unique(masks, return_counts=True)
        cover = (values[:, None] | values[None, :]) == self.full
        both = counts[:, None] * counts[None, :]
        same = np.diag(cover) * counts * (counts + 1) // 2  # unordered pairs within one mask, i <= j
        return int((np.triu(cover, 1) * both).sum() + same.sum())

    def plan(self, i: int, j: int) -> LogicalPlan:
        if j == -2:
            return self.fixed[i]
        parts = (self.subs[i],) if j < 0 else (self.subs[i], self.subs[j])
        return compose(parts, self.n_types)

    def stream(self, tighten: Callable[[int, int, LogicalPlan], float]
               ) -> Iterator[tuple[float, int, int, LogicalPlan]]:
        """``(bound, i, j, plan)`` in decreasing bound order; each plan's bound is tightened by
        ``tighten(i, j, plan)`` before it is yielded (never above its loose bound)."""
        heap: list[tuple[float, int, int, LogicalPlan]] = []  # (-tight bound, i, j, plan)
        k = 0
        n = len(self.ub)
        while k < n or heap:
            if heap and (k >= n or -heap[0][0] >= self.ub[k]):
                neg, i, j, lp = heapq.heappop(heap)
                yield -neg, i, j, lp
                continue
            i, j, loose = int(self.i[k]), int(self.j[k]), float(self.ub[k])
            k += 1
            lp = self.plan(i, j)
            tight = min(loose, tighten(i, j, lp))
            if tight > 0:
                heapq.heappush(heap, (-tight, i, j, lp))
            else:
                self.infeasible += 1

    def next_loose(self, k: int) -> float:
        return float(self.ub[k]) if k < len(self.ub) else 0.0

    # ---- the raw space, counted ------------------------------------------------------------------
    def raw_space(self) -> float:
        """Physical plans of Algorithm 1 for this input: every logical plan x every config
        vector x every count vector (at least one executor per node, within the budget) x
        every per-type routing vector on the grid. Counted by formula (float), never built."""
        if self.fixed:
            return float(sum(self._poly(lp).sum() * _routings(lp.routes, self.steps)
                             for lp in self.fixed))
        polys = np.stack([self._poly(s) for s in self.subs])  # [S, N+1]: plans by GPUs used
        routes = np.array([[len(rs) for rs in s.routes] for s in self.subs])  # [S, T]
        total = 0.0
        singles = np.nonzero(self.masks == self.full)[0]
        for k in singles:
            total += float(polys[k].sum()) * _routings_counts(routes[k], self.steps)
        if self.k_s < 2:
            return total
        # pairs of every subplan (the paper's space, whatever this search enumerates), by
        # groups of subplans with the same coverage, route counts and polynomial
        keys = np.concatenate([self.masks[:, None].astype(float), routes, polys], axis=1)
        uniq, inverse, mult = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
        del inverse
        g_mask = uniq[:, 0].astype(np.int64)
        g_routes = uniq[:, 1: 1 + self.n_types].astype(int)
        g_poly = uniq[:, 1 + self.n_types:]
        rev = np.cumsum(g_poly, axis=1)[:, ::-1]  # rev[h, a] = plans of h using <= N - a GPUs
        table = np.array([_log_comb(self.steps, r) for r in range(2 * int(routes.max(initial=1)) + 1)])
        for g in range(len(uniq)):
            hs = np.arange(g, len(uniq))
            hs = hs[(g_mask[g] | g_mask[hs]) == self.full]
            if not len(hs):
                continue
            pair = rev[hs] @ g_poly[g]  # pairs using <= N GPUs: sum_a poly_g[a] tail_h[N - a]
            logs = table[g_routes[g] + g_routes[hs]].sum(axis=1)
            times = np.where(hs == g, mult[g] * (mult[g] + 1) / 2, mult[g] * mult[hs])
            total += float((pair * np.exp(logs) * times).sum())
        return total

    def _poly(self, plan: Subplan | LogicalPlan) -> np.ndarray:
        """Configs x counts of ``plan``'s nodes by GPUs used (a polynomial in GPUs, up to N)."""
        poly = np.zeros(self.budget + 1)
        poly[0] = 1.0
        for node in plan.nodes:
            poly = np.convolve(poly, self._node_poly(node))[: self.budget + 1]
        return poly

    def _node_poly(self, node: frozenset[str]) -> np.ndarray:
        nc = self.table.node(node)
        f = np.zeros(self.budget + 1)
        for k in self._allowed(node):
            tp = int(nc.tp[k])
            f[tp::tp] += 1.0
        return f


def _log_comb(steps: int, routes: int) -> float:
    """log of the grid splits of one type over ``routes`` routes (0 routes: 1)."""
    if routes <= 1:
        return 0.0
    return math.lgamma(steps + routes) - math.lgamma(routes) - math.lgamma(steps + 1)


def _routings_counts(routes: np.ndarray, steps: int) -> float:
    return float(math.exp(sum(_log_comb(steps, int(r)) for r in routes)))


def _routings(routes: tuple[tuple[tuple[int, ...], ...], ...], steps: int) -> float:
    return _routings_counts(np.array([len(rs) for rs in routes]), steps)
