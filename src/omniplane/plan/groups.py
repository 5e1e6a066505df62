"""Executor-level routing with mixed configs (Cornfigurator 4.2, the second routing level),
tried around the search's best plans (:class:`omniplane.plan.search.Search` runs the trials
built here; docs/guides/plan.md, "Executor groups")."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from omniplane.plan.flow import Expansion
from omniplane.plan.routing import all_nodes_used, group_vectors
from omniplane.spec import PathClass

if TYPE_CHECKING:
    from omniplane.plan.costs import CostTable
    from omniplane.plan.logical import LogicalPlan
    from omniplane.plan.pool import Block
    from omniplane.plan.space import CountRule

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


def best_plans(blocks: Sequence[Block], score: Callable[[np.ndarray], np.ndarray]
               ) -> tuple[list[tuple[Block, int]], int]:
    """The best plan (block, row) by ``score`` of each of the ``GROUP_PLANS`` best logical plans
    among ``blocks`` (plans that already have executor groups left out), best first, and how
    many logical plans had one."""
    best: dict[int, tuple[float, Block, int]] = {}
    for b in blocks:
        if b.cands.lp.group_of:
            continue
        s = score(b.goodput)
        k = int(np.argmax(s))
        if id(b.cands.lp) not in best or s[k] > best[id(b.cands.lp)][0]:
            best[id(b.cands.lp)] = (float(s[k]), b, k)
    top = sorted(best.values(), key=lambda x: -x[0])[:GROUP_PLANS]
    return [(b, k) for _, b, k in top], len(best)


@dataclass(frozen=True)
class GroupTrial:
    """A plan with one node's executors split into two groups, as an expansion whose rows the
    flow phase re-plans (any config for the new group, the plan's own elsewhere)."""

    expansion: Expansion
    node: int  # the node split
    group: int  # the new group's node index (the last)
    n_vectors: int  # its routing vectors


def group_trials(best: Sequence[tuple[Block, int]], table: CostTable, pi: np.ndarray, gpus: int,
                 counts: CountRule | None, steps: int, allowed: Callable[[frozenset[str]], np.ndarray]
                 ) -> Iterator[GroupTrial]:
    """Executor-level routing with mixed configs (Cornfigurator 4.2) around each plan of
    ``best``: every node with two or more executors may split them into two groups of any two
    configs (``allowed``: a node's configs), each type routed between the groups on the grid
    of ``steps`` (one split per path class) and independently of its route."""
    path_class = path_classes(table)
    for b, k in best:
        c = b.cands
        for n in range(len(c.costs)):
            if c.cnt[k, n] < 2:
                continue
            lp2, vecs = group_split(c.lp, n, c.p[c.vec[k]][None], path_class, steps)
            if not len(vecs):
                continue
            node_opts = allowed(c.lp.nodes[n])
            opts = [np.array([c.opt[k, x]]) for x in range(len(c.costs))] + [node_opts]
            opts[n] = node_opts
            yield GroupTrial(Expansion(lp2, table, vecs, pi, gpus, opts, counts), n, len(c.costs), len(vecs))


def mixed_configs(trial: GroupTrial, opt: np.ndarray) -> tuple[np.ndarray, int]:
    """The rows (``opt``: their configs per node) of ``trial`` whose two groups mix configs,
    and how many have one config in both. (a, b) and (b, a) are one plan with the split
    mirrored (the grid holds both splits), so one order is kept (exact); two groups of one
    config are left out (a cut the caller reports)."""
    g1, g2 = opt[:, trial.node], opt[:, trial.group]
    return np.nonzero(g1 < g2)[0], int(np.count_nonzero(g1 == g2))
