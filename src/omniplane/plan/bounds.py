"""Admissible upper bounds on the flow rate ``R_d`` of every physical plan of a logical plan,
so that logical plans and whole rows of physical plans can be skipped exactly.

Every physical plan's goodput is at most its offered rate (``alpha x R_d``, times the
simulated sample's own arrival-count factor, :class:`~omniplane.plan.search.Search`), so a
bound on ``R_d`` is a bound on goodput: logical plans are expanded in decreasing bound order
and the search stops when the next bound falls below the best simulated plan (branch and
bound, docs/guides/plan.md "Search").

Per node ``n`` (a set of components) and type ``t``: ``w[n, t] = min_o s_full[o, t] tp_o``,
the fewest GPU-seconds one request costs on any allowed executor config, and ``m[n] =
min_o tp_o`` the fewest GPUs an executor needs. In a physical plan with rate ``R_d`` node
``n`` holds at least ``max(m[n], R_d sum_t pi_t share[n, t] w[n, t])`` GPUs. Three bounds
follow, each valid on its own:

* :func:`loose_single` / :func:`loose_pairs` (vectorised over millions of logical plans):
  the continuous relaxation per node for a single-route plan (:func:`relaxed_rate`);
  ``N / sum_t pi_t min_route W[route, t]`` for any plan; for two subplans side by side also
  ``max(M_a, R a0) + max(M_b, R b0) <= N`` with ``a0``/``b0`` the GPU-seconds of the types
  only one side covers and ``M`` a side's minimum GPUs;
* :func:`grid_bound` (per logical plan, when it reaches the top of the queue): for each
  routing vector the expansion will use, the exact integer maximum ``max {R : sum_n min_o
  tp_o max(1, ceil(R l[n, o])) <= N}``: the best ``R_d`` over every config and count vector
  of that routing vector, so its maximum over the vectors is attained by some physical plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from omniplane.plan.costs import NodeCosts
from omniplane.plan.logical import Subplan

BISECT = 16  # bisection steps of the integer bound (within 2^-16 of the continuous bound above it)


def node_floor(nc: NodeCosts, allowed: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """``(m, w[T])``: the node's fewest GPUs per executor and fewest GPU-seconds per request
    of each type over its ``allowed`` options (inf when it has none)."""
    opts = np.arange(len(nc.options)) if allowed is None else allowed
    if not len(opts):
        return np.inf, np.full(nc.s_full.shape[1], np.inf)
    return float(nc.tp[opts].min()), (nc.s_full[opts] * nc.tp[opts, None]).min(axis=0)


def relaxed_rate(m: np.ndarray, load: np.ndarray, budget: float) -> float:
    """Largest R with ``G(R) = sum_n max(m_n, R load_n) <= budget`` (0 if the minimums do not
    fit). G is piecewise linear and increasing with knots ``m_n / load_n``: walk the knots."""
    if m.sum() > budget + 1e-9:
        return 0.0
    pos = load > 0
    if not pos.any():
        return float("inf")
    knots = m[pos] / load[pos]
    order = np.argsort(knots)
    base = float(m.sum())  # G below the first knot
    slope = 0.0
    prev = 0.0
    for k, (knot, mk, lk) in enumerate(zip(knots[order], m[pos][order], load[pos][order], strict=True)):
        g_knot = base + slope * (knot - prev) if k else base
        if g_knot >= budget and slope > 0:
            return prev + (budget - base) / slope
        base, prev = g_knot - mk, knot  # node k turns from its minimum to R * load
        base += lk * knot
        slope += lk
    return prev + (budget - base) / slope


THETA_LEVELS = (0.5, 1.0)  # reference rates (x the subplan's cheapest-route bound) of the relaxations


@dataclass(frozen=True)
class SubplanAgg:
    """Aggregates of one subplan for the vectorised bounds.

    ``theta_min[k]`` and ``theta_cost[k, t]`` are one relaxation each: ``max(m_n, y) >= theta_n
    m_n + (1 - theta_n) y`` for any ``theta_n`` in [0, 1], so a plan needs at least
    ``theta_min + R sum_t pi_t theta_cost[t]`` GPUs with ``theta_cost`` each type's cheapest
    route in GPU-seconds weighted by ``1 - theta_n``. Pattern 0 is ``theta = 0``; pattern
    ``k`` sets ``theta_n = 1`` on the nodes whose load at ``THETA_LEVELS[k - 1]`` of the
    subplan's own bound stays below their minimum (they cost their minimum either way)."""

    min_gpus: float  # sum of the nodes' minimum GPUs
    route_cost: np.ndarray  # [T] cheapest route's GPU-seconds per request (inf: not covered)
    single_route: bool
    node_min: np.ndarray  # [m]
    node_load: np.ndarray  # [m] GPU-seconds per unit rate, each type on its cheapest route
    theta_min: np.ndarray  # [K]
    theta_cost: np.ndarray  # [K, T]


def subplan_agg(sp: Subplan, floors: Sequence[tuple[float, np.ndarray]], pi: np.ndarray,
                budget: int) -> SubplanAgg:
    """``floors[k]`` is :func:`node_floor` of ``sp.nodes[k]``."""
    n_types, n_nodes = len(pi), len(floors)
    m = np.array([f[0] for f in floors], dtype=float)
    w = np.stack([f[1] for f in floors]) if floors else np.zeros((0, n_types))
    qt = np.array([t for t, rs in enumerate(sp.routes) for _ in rs], dtype=int)  # type of each route
    inc = np.zeros((len(qt), n_nodes))  # route x node incidence
    q = 0
    for rs in sp.routes:
        for r, _ in rs:
            inc[q, list(r)] = 1.0
            q += 1

    def cheapest(weights: np.ndarray) -> np.ndarray:
        """[K, T] cheapest route per type under node weights [K, m] (inf: not covered)."""
        per = np.einsum("qn,nq,kn->kq", inc, w[:, qt], weights) if len(qt) else np.zeros((len(weights), 0))
        out = np.full((len(weights), n_types), np.inf)
        for k in range(len(weights)):
            np.minimum.at(out[k], qt, per[k])
        return out

    base = cheapest(np.ones((1, n_nodes)))[0]
    per = np.einsum("qn,nq->q", inc, w[:, qt])  # GPU-seconds of each route
    order = np.lexsort((per, qt))
    first = order[np.r_[True, qt[order][1:] != qt[order][:-1]]] if len(qt) else order  # cheapest per type
    load = (inc[first] * (pi[qt[first]][:, None] * w[:, qt[first]].T)).sum(axis=0) if len(qt) else \
        np.zeros(n_nodes)
    total = float(load.sum())
    own = budget / total if total > 0 else np.inf
    thetas = np.zeros((1 + len(THETA_LEVELS), n_nodes))
    for k, level in enumerate(THETA_LEVELS, start=1):
        thetas[k] = (level * own * load <= m) if np.isfinite(own) else 1.0
    t_cost = cheapest(1.0 - thetas)
    single = all(len(rs) <= 1 for rs in sp.routes)
    return SubplanAgg(float(m.sum()), base, single, m, load, thetas @ m, t_cost)


def loose_single(a: SubplanAgg, pi: np.ndarray, budget: int) -> float:
    """Bound of one subplan alone (it covers every active type)."""
    if not np.isfinite(a.min_gpus) or a.min_gpus > budget:
        return 0.0
    if a.single_route:
        return relaxed_rate(a.node_min, a.node_load, budget)
    return float(theta_bound(a.theta_min[None, :], a.theta_cost[None, :, :], pi, budget)[0])


def theta_bound(t_min: np.ndarray, t_cost: np.ndarray, pi: np.ndarray, budget: int) -> np.ndarray:
    """``min_k (N - t_min[:, k]) / (t_cost[:, k, :] @ pi)`` over the relaxations ``k``
    (``t_min[P, K]``, ``t_cost[P, K, T]``; inf costs are types the plan does not cover)."""
    cost = np.where(np.isfinite(t_cost), t_cost, 0.0) @ pi  # [P, K]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(cost > 0, (budget - t_min) / cost, np.where(t_min <= budget, np.inf, 0.0))
    return np.asarray(np.maximum(r, 0.0).min(axis=1))


def loose_pairs(a: PairSide, b: PairSide, pi: np.ndarray, budget: int) -> np.ndarray:
    """Bounds of pairs of subplans side by side (``a``, ``b``: the two sides' aggregates, one
    row per pair): the relaxations of :class:`SubplanAgg` with each type on the cheaper side,
    and :func:`two_blocks` on the traffic only one side can serve."""
    cost_a, cost_b = a.cost, b.cost
    fin_a, fin_b = np.isfinite(cost_a), np.isfinite(cost_b)
    a0 = np.where(fin_a & ~fin_b, cost_a, 0.0) @ pi  # GPU-seconds only side a can serve
    b0 = np.where(fin_b & ~fin_a, cost_b, 0.0) @ pi
    fits = np.isfinite(a.mins) & np.isfinite(b.mins) & (a.mins + b.mins <= budget + 1e-9)
    ub = theta_bound(a.t_min + b.t_min, np.minimum(a.t_cost, b.t_cost), pi, budget)
    ub = np.minimum(ub, two_blocks(a.mins, b.mins, a0, b0, budget))
    return np.where(fits, ub, 0.0)


@dataclass(frozen=True)
class PairSide:
    """One side of many pairs, as arrays (rows of :class:`SubplanAgg` fields)."""

    mins: np.ndarray  # [P]
    cost: np.ndarray  # [P, T]
    t_min: np.ndarray  # [P, K]
    t_cost: np.ndarray  # [P, K, T]


def two_blocks(ma: np.ndarray | float, mb: np.ndarray, la: np.ndarray, lb: np.ndarray,
               budget: int) -> np.ndarray:
    """Largest R with ``max(ma, R la) + max(mb, R lb) <= budget``, elementwise (inf when no
    load binds). The left side is increasing in R: try the three linear pieces' roots."""
    best = np.zeros(np.broadcast(mb, la, lb).shape)
    unbounded = (la <= 0) & (lb <= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        roots = [np.where(la + lb > 0, budget / (la + lb), np.inf),  # both above their minimums
                 np.where(la > 0, (budget - mb) / la, np.inf),  # b at its minimum
                 np.where(lb > 0, (budget - ma) / lb, np.inf)]  # a at its minimum
    for r in roots:
        fin = np.isfinite(r)
        x = np.where(fin, r, 0.0)
        ok = fin & (np.maximum(ma, x * la) + np.maximum(mb, x * lb) <= budget * (1 + 1e-9))
        best = np.where(ok, np.maximum(best, x), best)
    return np.where(unbounded, np.inf, best)


def grid_bound(loads: Sequence[np.ndarray], tps: Sequence[np.ndarray], budget: int) -> np.ndarray:
    """Per routing vector ``v``: an upper bound on the largest ``R`` at which some config and
    count vector fits the budget, ``max {R : sum_n min_o tp[n][o] max(1, ceil(R loads[n][v, o]))
    <= N}`` (``loads[n]`` is ``[V, O_n]``), by bisection from the continuous bound ``N / sum_n
    min_o tp_o loads[n][v, o]``: every step's upper end is a valid bound (``BISECT`` steps). 0
    when even one executor per node does not fit."""
    n_v = loads[0].shape[0] if loads else 0
    least = sum((tp.min() for tp in tps), 0)
    if least > budget or n_v == 0:
        return np.zeros(n_v)
    load = np.concatenate(list(loads), axis=1)  # [V, sum O]
    tp = np.concatenate(list(tps)).astype(float)
    starts = np.cumsum([0] + [len(t) for t in tps[:-1]])
    with np.errstate(divide="ignore"):
        heavy = np.minimum.reduceat(np.where(load > 0, load * tp, np.inf), starts, axis=1)  # [V, m] GPU-s
    positive = np.isfinite(heavy)
    free = ~positive.any(axis=1)
    # every node needs at least R heavy_n GPUs, so no R above N / sum_n heavy_n fits
    hi = np.where(free, 0.0, budget / np.where(positive, heavy, 0.0).sum(axis=1).clip(min=1e-300))
    lo = np.zeros(n_v)
    for _ in range(BISECT):
        mid = (lo + hi) / 2
        need = np.maximum(1.0, np.ceil(mid[:, None] * load - 1e-9)) * tp[None, :]
        ok = np.minimum.reduceat(need, starts, axis=1).sum(axis=1) <= budget
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    return np.where(free, np.inf, hi)


def gpus_needed(loads: Sequence[np.ndarray], tps: Sequence[np.ndarray], rate: np.ndarray) -> np.ndarray:
    """``sum_n min_o tp max(1, ceil(rate loads))`` per routing vector."""
    total = np.zeros(len(rate))
    for ld, tp in zip(loads, tps, strict=True):
        need = np.maximum(1.0, np.ceil(rate[:, None] * ld - 1e-9)) * tp[None, :]
        total += need.min(axis=1)
    return total
