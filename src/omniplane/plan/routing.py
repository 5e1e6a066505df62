"""Routing vectors of a logical plan on the probability grid (Cornfigurator section 4.2).

Types with one route have no choice. A type with several routes splits its traffic over them in
steps of ``1 / steps``; all types' splits together are one routing vector. When the product of
the per-type grids exceeds ``limit``, types with the same route set (a *class*) share one
split; when even that exceeds it, one split over the plan's lanes (the simple subplans the
routes come from) is shared by every class, renormalised over the lanes a class can use and
rounded to the grid (documented in docs/guides/plan.md, "Routing").

Vectors that leave a node instance without any traffic are dropped: such a plan is a smaller
logical plan plus idle GPUs.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from omniplane.plan.logical import LogicalPlan


def compositions(total: int, parts: int) -> np.ndarray:
    """All vectors of ``parts`` non-negative integers summing to ``total`` (stars and bars)."""
    rows = []
    for bars in itertools.combinations(range(total + parts - 1), parts - 1):
        prev, row = -1, []
        for b in bars:
            row.append(b - prev - 1)
            prev = b
        row.append(total + parts - 1 - prev - 1)
        rows.append(row)
    return np.array(rows, dtype=float).reshape(-1, parts)


def round_to_grid(p: np.ndarray, steps: int) -> np.ndarray:
    """Largest-remainder rounding of probability rows (last axis) to multiples of 1/steps."""
    scaled = p * steps
    base = np.floor(scaled + 1e-9)
    short = (steps - base.sum(axis=-1)).astype(int)
    rem = scaled - base
    order = np.argsort(-rem, axis=-1, kind="stable")
    ranks = np.argsort(order, axis=-1, kind="stable")
    base += ranks < short[..., None]
    return np.asarray(base / steps)


def routing_vectors(lp: LogicalPlan, steps: int, limit: int) -> np.ndarray:
    """Routing vectors ``p[v, t, r]`` (probability of route ``r`` of type ``t``): every type
    split on its own when the product of their grids fits ``limit``; else types with the same
    routes share a split (classes); else one split over lanes is shared by all."""
    n_types = len(lp.routes)
    width = max(1, max(len(rs) for rs in lp.routes))
    fixed = np.zeros((n_types, width))
    for t, rs in enumerate(lp.routes):
        if len(rs) == 1:
            fixed[t, 0] = 1.0
    classes = lp.classes
    if not classes:
        return fixed[None]
    per_type: list[tuple[int, ...]] = [(t,) for c in classes for t in c.types]
    n_routes = {t: len(c.routes) for c in classes for t in c.types}
    groups: list[tuple[int, ...]] | None = None
    by_class: list[tuple[int, ...]] = [c.types for c in classes]
    for option in (per_type, by_class):
        sizes = [math.comb(steps + n_routes[g[0]] - 1, n_routes[g[0]] - 1) for g in option]
        if math.prod(sizes) <= limit:
            groups = option
            break
    if groups is not None:
        splits = [compositions(steps, n_routes[g[0]]) / steps for g in groups]
        vecs = []
        for combo in itertools.product(*splits):
            p = fixed.copy()
            for g, split in zip(groups, combo, strict=True):
                for t in g:
                    p[t, : len(split)] = split
            vecs.append(p)
        out = np.stack(vecs)
    else:
        out = _lane_tied(lp, fixed, steps)
    return np.asarray(out[all_nodes_used(lp, out)])


def _lane_tied(lp: LogicalPlan, fixed: np.ndarray, steps: int) -> np.ndarray:
    """One split over the plan's lanes shared by every class (renormalised over the lanes a
    class can use, rounded to the grid); splits that give some class no lane are dropped."""
    w = compositions(steps, lp.n_lanes) / steps  # [L, lanes]
    out = np.repeat(fixed[None], len(w), axis=0)
    ok = np.ones(len(w), dtype=bool)
    for cls in lp.classes:
        share = w[:, list(cls.lanes)]
        total = share.sum(axis=1)
        ok &= total > 0
        split = round_to_grid(share / np.where(total > 0, total, 1.0)[:, None], steps)
        for t in cls.types:
            out[:, t, : split.shape[1]] = split
    return np.asarray(out[ok])


def group_vectors(base: np.ndarray, origin: tuple[tuple[tuple[int, int], ...], ...], classes: list[int],
                  steps: int) -> np.ndarray:
    """Routing vectors of a plan with a second executor group at one node
    (:meth:`LogicalPlan.with_group`): the path-level split ``base[T, W]`` times, for each type
    through that node, a split ``q`` between its two groups on the grid, one split per class
    (``classes[t]``, -1: the type does not pass the node). The group choice is independent of
    the route, as the simulator and a runtime route within a node."""
    used = sorted({c for c in classes if c >= 0})
    grid = np.arange(steps + 1) / steps
    width = max(len(o) for o in origin)
    out = []
    for qs in itertools.product(grid, repeat=len(used)):
        q = dict(zip(used, qs, strict=True))
        p = np.zeros((len(origin), width))
        for t, came in enumerate(origin):
            for j, (r, g) in enumerate(came):
                share = 1.0 if g < 0 else (q[classes[t]] if g == 0 else 1 - q[classes[t]])
                p[t, j] = base[t, r] * share
        out.append(p)
    return np.stack(out) if out else np.zeros((0, len(origin), width))


def type_grid_size(lp: LogicalPlan, steps: int) -> int:
    """Routing vectors with every type split on its own (the paper's grid, before tying)."""
    out = 1
    for rs in lp.routes:
        if len(rs) > 1:
            out *= math.comb(steps + len(rs) - 1, len(rs) - 1)
    return out


def node_share(lp: LogicalPlan, p: np.ndarray) -> np.ndarray:
    """``share[v, n, t]``: fraction of type-``t`` traffic passing node instance ``n``."""
    n_nodes, n_types = len(lp.nodes), len(lp.routes)
    out = np.zeros((p.shape[0], n_nodes, n_types))
    for t, rs in enumerate(lp.routes):
        for r, route in enumerate(rs):
            for n in route:
                out[:, n, t] += p[:, t, r]
    return out


def all_nodes_used(lp: LogicalPlan, p: np.ndarray) -> np.ndarray:
    if p.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    share = node_share(lp, p)
    return np.asarray((share.sum(axis=2) > 1e-12).all(axis=1))
