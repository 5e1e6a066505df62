"""The whole plan space with exact pruning, for the optimality check (issue 14, "Must show";
``bench/bench_optimality.py``).

The space is every logical plan of Algorithm 1 at ``k_c``/``k_s`` (compound subplans composed
side by side included), each with every executor config per node, every count vector of at
least one executor per node within the budget (redundant ones included) and every routing
vector the planner uses (:func:`~omniplane.plan.routing.routing_vectors`); plus, per logical
plan and node instance, the planner's executor-group plans (:mod:`omniplane.plan.groups`: a
second group at that node, any two configs, each path class split between the groups on the
grid; same-config groups included here, though the planner leaves them out).

**Exact pruning.** A plan simulated at ``alpha x R_d`` has simulated goodput at most
``factor x alpha x R_d`` (``factor``: the sample's arrivals per unit of offered rate,
:meth:`~omniplane.plan.refine.SampleRunner.arrival_factor`), so a plan whose ``R_d`` is at or
below ``cut / (factor x alpha)`` cannot simulate above ``cut``. Skipped without simulation:

* logical plans whose loose bound (:class:`~omniplane.plan.order.LogicalOrder`, a continuous
  relaxation over any routing, config and count, so it also bounds their executor-group
  plans) is at or below the rate cut;
* per logical plan or executor-group variant, routing/config rows whose exact integer bound
  (:meth:`~omniplane.plan.flow.Expansion.rows`) is below it, and every count vector whose
  ``R_d`` is.

Everything else is built and returned for simulation.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from omniplane.plan.costs import CostTable
from omniplane.plan.flow import Candidates, Expansion
from omniplane.plan.groups import group_split, path_classes
from omniplane.plan.logical import LogicalPlan
from omniplane.plan.order import LogicalOrder
from omniplane.plan.routing import routing_vectors, type_grid_size
from omniplane.plan.space import FULL

SLACK = 1e-9  # relative tolerance on the rate cut (float noise only: pruning stays conservative)


@dataclass
class Tally:
    """What the pruned enumeration covered (counts labelled as in the bench's output)."""

    logical_total: int = 0  # logical plans of the space (formula-free: each one listed)
    logical_infeasible: int = 0  # minimum GPUs above the budget
    logical_pruned: int = 0  # loose bound at or below the cut (with their executor-group plans)
    logical_open: int = 0  # logical plans whose rows were enumerated
    variants: int = 0  # (logical plan or executor-group variant) expansions enumerated
    variants_pruned: int = 0  # expansions whose exact bound was at or below the cut
    plans_built: int = 0  # physical plans at or above the cut (returned for simulation)
    tied_routing: int = 0  # opened logical plans whose routing vectors are tied (past max_routings)
    by_kind: dict[str, int] = field(default_factory=dict)  # plans built per kind


@cache
def count_vectors(tps: tuple[int, ...], budget: int) -> np.ndarray:
    """Every count vector (>= 1 executor per node) whose GPUs fit the budget, ``[K, m]``."""
    ranges = [range(1, budget // tp + 1) for tp in tps]
    rows = [c for c in itertools.product(*ranges)
            if sum(x * t for x, t in zip(c, tps, strict=True)) <= budget]
    return np.array(rows, dtype=int).reshape(len(rows), len(tps))


def every_count(exp: Expansion, thr: float) -> Candidates:
    """Every physical plan of ``exp`` with ``R_d >= thr``, redundant count vectors included:
    the rows whose top rate reaches ``thr`` (exact, :meth:`Expansion.rows`) times each count
    vector within the budget whose bottleneck rate reaches it."""
    opt, vec, _top, _ = exp.rows(thr)
    m = len(exp.costs)
    tp = np.stack([exp.costs[n].tp[opt[:, n]] for n in range(m)], axis=1).astype(int) if len(opt) else \
        np.zeros((0, m), int)
    load = np.stack([np.einsum("bt,bt->b", exp.costs[n].s_full[opt[:, n]], exp.demand[vec, n, :])
                     for n in range(m)], axis=1) if len(opt) else np.zeros((0, m))
    o_out, c_out, v_out, r_out, g_out = [], [], [], [], []
    keys = [tuple(r) for r in tp.tolist()]
    for key in sorted(set(keys)):
        rows = np.array([k == key for k in keys])
        cv = count_vectors(key, exp.budget)  # [K, m]
        ld = load[rows]  # [B, m]
        with np.errstate(divide="ignore"):
            rate = np.where(ld[:, None, :] > 0, cv[None, :, :] / ld[:, None, :], np.inf).min(axis=2)  # [B, K]
        bi, ki = np.nonzero(np.isfinite(rate) & (rate >= thr))
        o_out.append(opt[rows][bi])
        c_out.append(cv[ki])
        v_out.append(vec[rows][bi])
        r_out.append(rate[bi, ki])
        g_out.append(cv[ki] @ np.array(key))
    if not o_out:
        z = np.zeros((0, m), int)
        return Candidates(exp.lp, exp.costs, exp.p, exp.share, z, z, np.zeros(0, int), np.zeros(0),
                          np.zeros(0, int))
    return Candidates(exp.lp, exp.costs, exp.p, exp.share, np.concatenate(o_out), np.concatenate(c_out),
                      np.concatenate(v_out), np.concatenate(r_out), np.concatenate(g_out))


def group_variants(lp: LogicalPlan, table: CostTable, base: np.ndarray, steps: int
                   ) -> Iterator[tuple[int, LogicalPlan, np.ndarray]]:
    """``(node, plan, routing vectors)`` of every executor-group variant of ``lp``
    (:func:`omniplane.plan.groups.group_split`, the planner's construction, over every base vector)."""
    path_class = path_classes(table)
    for n in range(len(lp.nodes)):
        lp2, vecs = group_split(lp, n, base, path_class, steps)
        if len(vecs):
            yield n, lp2, np.unique(vecs.round(9), axis=0)


class WholeSpace:
    """The whole space's plans that could simulate above ``cut`` (see the module docstring)."""

    def __init__(self, table: CostTable, pi: np.ndarray, budget: int, k_c: int, k_s: int, steps: int,
                 max_routings: int, groups: bool = True) -> None:
        self.table, self.pi, self.budget = table, pi, budget
        self.steps, self.max_routings, self.groups = steps, max_routings, groups
        self.order = LogicalOrder(table, FULL, pi, budget, k_c, k_s, steps, compose_compound=True)
        self.tally = Tally(logical_total=self.order.total, logical_infeasible=self.order.infeasible)
        self.current = float("inf")  # loose rate bound of the logical plan being enumerated

    def raw_space(self) -> float:
        """Physical plans of Algorithm 1 (per-type routing grid, every count; by formula)."""
        return self.order.raw_space()

    def plans(self, rate_cut: float) -> Iterator[tuple[str, Candidates]]:
        """``(kind, candidates)`` with ``R_d >= rate_cut`` ("logical" or "group"), best loose bound first."""
        tl, od = self.tally, self.order
        thr = rate_cut * (1 - SLACK)
        n_all = len(od.ub)
        k = 0
        while k < n_all and od.ub[k] >= thr:
            lp = od.plan(int(od.i[k]), int(od.j[k]))
            self.current = float(od.ub[k])
            k += 1
            tl.logical_open += 1
            vecs = routing_vectors(lp, self.steps, self.max_routings)
            tl.tied_routing += type_grid_size(lp, self.steps) > len(vecs)
            variants: list[tuple[str, LogicalPlan, np.ndarray, int]] = [("logical", lp, vecs, -1)]
            if self.groups:
                variants += [("group", lp2, gv, n)
                             for n, lp2, gv in group_variants(lp, self.table, vecs, self.steps)]
            for kind, plan, p, n in variants:
                allowed = [np.arange(len(self.table.node(x).options)) for x in plan.nodes]
                exp = Expansion(plan, self.table, p, self.pi, self.budget, allowed)
                if exp.bound() < thr:
                    tl.variants_pruned += 1
                    continue
                tl.variants += 1
                cands = every_count(exp, thr)
                if kind == "group" and len(cands):  # one order of the two groups' configs (mirrored split)
                    keep = np.nonzero(cands.opt[:, n] <= cands.opt[:, len(lp.nodes)])[0]
                    cands = cands.take(keep)
                tl.plans_built += len(cands)
                tl.by_kind[kind] = tl.by_kind.get(kind, 0) + len(cands)
                if len(cands):
                    yield kind, cands
        tl.logical_pruned = n_all - k
        self.current = 0.0
