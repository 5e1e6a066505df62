"""Upper bounds and priorities of logical plans, so that most of them are never expanded.

Per node ``n`` and type ``t`` let ``w[n, t]`` be the fewest GPU-seconds one request costs on
any executor config of the node (``min_o s_full[o, t] x tp_o``) and ``m[n]`` the fewest GPUs an
executor needs. In any physical plan node ``n`` holds at least ``max(m[n], R_d x sum_t pi_t
share[n, t] w[n, t])`` GPUs, so

* a single-route logical plan has ``R_d <= R*`` where ``sum_n max(m[n], R* l[n]) = N``
  (:func:`relaxed_rate`; exact for the continuous relaxation);
* any logical plan has ``R_d <= N / sum_t pi_t min_route W[route, t]`` (``W`` the route's
  GPU-seconds) and needs ``sum_n m[n] <= N``.

Both are valid upper bounds (used for exact pruning against the flow-domination threshold).
The *priority* orders plans for expansion: each type's traffic on its cheapest route, every
node's minimum counted (for side-by-side subplans, per subplan block); it is not a bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from omniplane.plan.costs import CostTable
from omniplane.plan.logical import Subplan


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


@dataclass(frozen=True)
class SubplanBound:
    """Aggregates of one subplan for bounds and priorities."""

    min_gpus: float  # sum of the nodes' minimum GPUs
    route_cost: np.ndarray  # [T] cheapest route's GPU-seconds per request (inf: not covered)
    ub: float  # valid upper bound on R_d of this subplan alone
    priority: float  # expansion priority of this subplan alone


def subplan_bound(sp: Subplan, table: CostTable, pi: np.ndarray, budget: int) -> SubplanBound:
    costs = [table.node(n) for n in sp.nodes]
    n_types = len(pi)
    if any(not nc.options for nc in costs):
        return SubplanBound(np.inf, np.full(n_types, np.inf), 0.0, 0.0)
    w = np.stack([(nc.s_full * nc.tp[:, None]).min(axis=0) for nc in costs])  # [m, T]
    m = np.array([nc.tp.min() for nc in costs], dtype=float)
    route_cost = np.full(n_types, np.inf)
    load = np.zeros(len(costs))
    for t, rs in enumerate(sp.routes):
        if not rs:
            continue
        per = [w[list(r), t].sum() for r, _ in rs]
        best = int(np.argmin(per))
        route_cost[t] = per[best]
        for n in rs[best][0]:
            load[n] += pi[t] * w[n, t]
    prio = relaxed_rate(m, load, budget)
    if all(len(rs) <= 1 for rs in sp.routes):
        ub = prio
    else:
        total = float(np.sum(pi * np.where(np.isfinite(route_cost), route_cost, 0.0)))
        ub = budget / total if total > 0 else np.inf
        ub = ub if m.sum() <= budget else 0.0
    return SubplanBound(float(m.sum()), route_cost, ub, prio)


def pair_bounds(a: SubplanBound, bs: list[SubplanBound], pi: np.ndarray,
                budget: int) -> tuple[np.ndarray, np.ndarray]:
    """(valid upper bounds, priorities) of ``a`` side by side with each of ``bs``."""
    wa = a.route_cost[None, :]
    wb = np.stack([b.route_cost for b in bs])
    mb = np.array([b.min_gpus for b in bs])
    best = np.minimum(wa, wb)
    total = (pi[None, :] * np.where(np.isfinite(best), best, 0.0)).sum(axis=1)
    fits = a.min_gpus + mb <= budget + 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        ub = np.where(fits & (total > 0), budget / total, 0.0)
        to_a = wa <= wb
        la = (pi[None, :] * np.where(to_a & np.isfinite(wa), wa, 0.0)).sum(axis=1)
        lb = (pi[None, :] * np.where(~to_a & np.isfinite(wb), wb, 0.0)).sum(axis=1)
        prio = _two_blocks(a.min_gpus, mb, la, lb, budget)
    return ub, np.where(fits, np.minimum(prio, ub), 0.0)


def _two_blocks(ma: float, mb: np.ndarray, la: np.ndarray, lb: np.ndarray, budget: int) -> np.ndarray:
    """Largest R with max(ma, R la) + max(mb, R lb) <= budget, elementwise."""
    cands = []
    with np.errstate(divide="ignore", invalid="ignore"):
        cands.append(np.where(la + lb > 0, budget / (la + lb), np.inf))  # both above their minimums
        cands.append(np.where(la > 0, (budget - mb) / la, np.inf))  # b at its minimum
        cands.append(np.where(lb > 0, (budget - ma) / lb, np.inf))  # a at its minimum
    best = np.zeros_like(mb, dtype=float)
    for r in cands:
        ok = np.isfinite(r) & (np.maximum(ma, r * la) + np.maximum(mb, r * lb) <= budget * (1 + 1e-9))
        best = np.where(ok, np.maximum(best, r), best)
    return best
