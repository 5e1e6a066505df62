"""Executor-level routing with mixed configs (Cornfigurator 4.2, the second routing level),
tried around the search's best plans (:class:`omniplane.plan.search.Search`; docs/guides/plan.md,
"Executor groups")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from omniplane.plan.flow import Expansion, raw_count
from omniplane.plan.routing import all_nodes_used, group_vectors
from omniplane.spec import PathClass

if TYPE_CHECKING:
    from omniplane.plan.costs import CostTable
    from omniplane.plan.logical import LogicalPlan
    from omniplane.plan.pool import Block
    from omniplane.plan.search import Search

GROUP_PLANS = 3  # logical plans whose best plan is tried with two executor groups per node (assumption)


def path_classes(table: CostTable) -> list[int]:
    """Per request type of ``table``, its path class as the group split's index (0 short, 1 long)."""
    model = table.model
    return [0 if model.request_type(t).path_class is PathClass.SHORT else 1 for t in table.types]


def group_split(lp: LogicalPlan, n: int, base: np.ndarray, path_class: list[int], steps: int
                ) -> tuple[LogicalPlan, np.ndarray]:
    """``lp`` with a second executor group at node ``n``, and its routing vectors: every base
    vector (rows of ``base``) with each path class through ``n`` split between the two groups on
    the grid (one split per class), those that leave a node unused dropped."""
    lp2, origin = lp.with_group(n)
    classes = [path_class[t] if any(n in r for r in lp.routes[t]) else -1 for t in range(len(lp.routes))]
    vecs = np.concatenate([group_vectors(b, origin, classes, steps) for b in base])
    return lp2, vecs[all_nodes_used(lp2, vecs)]


def executor_groups(search: Search) -> None:
    """Executor-level routing with mixed configs (Cornfigurator 4.2): around the best plan
    of each of the ``GROUP_PLANS`` best logical plans, every node with two or more
    executors may split them into two groups of any two configs, each type routed between
    the groups on the grid (one split per path class) and independently of its route; the
    counts are re-planned by the flow phase and the plans estimated like any other."""
    search._prune_pool()
    best: dict[int, tuple[float, Block, int]] = {}
    for b in search.pool:
        if b.cands.lp.group_of:
            continue
        score = search.score(b.goodput, search.pi)
        k = int(np.argmax(score))
        if id(b.cands.lp) not in best or score[k] > best[id(b.cands.lp)][0]:
            best[id(b.cands.lp)] = (float(score[k]), b, k)
    top = sorted(best.values(), key=lambda x: -x[0])[:GROUP_PLANS]
    path_class = path_classes(search.table)
    same = 0
    for _, b, k in top:
        c = b.cands
        for n in range(len(c.costs)):
            if c.cnt[k, n] < 2:
                continue
            lp2, vecs = group_split(c.lp, n, c.p[c.vec[k]][None], path_class, search.opt.grid_steps)
            if not len(vecs):
                continue
            node_opts = search._allowed(c.lp.nodes[n])
            allowed = [np.array([c.opt[k, x]]) for x in range(len(c.costs))] + [node_opts]
            allowed[n] = node_opts
            exp = Expansion(lp2, search.table, vecs, search.pi, search.budget, allowed, search.space.counts)
            # the raw space grows by this grouped logical plan's own (any config and count per
            # node and group, these group vectors; by formula): its plans are not in Algorithm
            # 1's space, and the flow count below includes the ones built from it
            search.counts.raw_space += float(raw_count(exp.costs, len(vecs), search.budget))
            opt, vec, top_r, cnt = exp.rows(search.threshold())
            search.counts.built += exp.rows_evaluated
            # Mixed configs only: (a, b) and (b, a) are one plan with the split mirrored (the
            # grid holds both splits), so one order is kept (exact); two groups of one config
            # are left out (a cut, in the ledger below).
            g1, g2 = opt[:, n], opt[:, len(c.costs)]
            same += int(np.count_nonzero(g1 == g2))
            keep = np.nonzero(g1 < g2)[0]
            search._band(exp, opt[keep], vec[keep], top_r[keep], cnt[keep])
            search.stats.grouped += 1
    search.ledger.drop("flow", f"two executor groups per node tried only around the best plan of the "
                     f"{GROUP_PLANS} best logical plans", "heuristic", "logical plans",
                     max(0, len(best) - GROUP_PLANS))
    if same:
        search.ledger.drop("flow", "two executor groups of the same config (a type-partitioned split of "
                         "identical executors) not explored: groups mix configs (Cornfigurator 4.2)",
                         "heuristic", "plans", same)
