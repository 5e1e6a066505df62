"""Algorithm 1 of Cornfigurator (section 4.2): simple subplans, compound subplans, logical plans.

* Simple subplans: every subgraph of the model that is a union of request-type paths (so it
  covers at least one type and has no unused component), times Keep/Merge on each colocatable
  edge inside it; a merged set must have an executor type (``ModelSpec.executor_type_for``).
  Different Keep/Merge choices giving the same partition are one subplan.
* Compound subplans: up to ``k_c`` simple subplans that share at least one node, merged; a
  type covered by several keeps one route per member (its lane), routed at the entry. A merge
  in which no type gains a second distinct route equals one of its members and is dropped.
* Logical plans: up to ``k_s`` (simple or compound) subplans side by side whose coverage is
  every request type. They are produced lazily (:func:`logical_plans`) because their number
  grows with the square of the subplans' (about 1.9 million for Qwen3-Omni at k_c = k_s = 2);
  the planner draws them in order of an upper bound and stops when the bound is beaten.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from omniplane.plan.logical import LogicalPlan, Node, Route, Subplan, compose
from omniplane.spec import ModelSpec


def path_unions(model: ModelSpec) -> list[frozenset[str]]:
    """Every distinct union of one or more request-type paths."""
    paths = {frozenset(model.request_type(t).path) for t in model.type_names}
    seen = set(paths)
    frontier = set(paths)
    while frontier:
        new = {a | b for a in frontier for b in seen} - seen
        seen |= new
        frontier = new
    return sorted(seen, key=lambda s: (len(s), sorted(s)))


def partitions(model: ModelSpec, sub: frozenset[str]) -> list[tuple[Node, ...]]:
    """Keep/Merge on each colocatable edge inside ``sub``: the distinct hostable partitions."""
    edges = [(a, b) for a, b, ok in model.edges if ok and a in sub and b in sub]
    out: dict[frozenset[Node], tuple[Node, ...]] = {}
    for merge in itertools.product((False, True), repeat=len(edges)):
        parent = {c: c for c in sub}

        def find(x: str, parent: dict[str, str] = parent) -> str:
            while parent[x] != x:
                x = parent[x]
            return x

        for (a, b), m in zip(edges, merge, strict=True):
            if m:
                parent[find(a)] = find(b)
        groups: dict[str, set[str]] = {}
        for c in sub:
            groups.setdefault(find(c), set()).add(c)
        nodes = frozenset(frozenset(g) for g in groups.values())
        if all(model.executor_type_for(n) is not None for n in nodes):
            out.setdefault(nodes, tuple(sorted(nodes, key=lambda n: _node_order(model, n))))
    return list(out.values())


def _node_order(model: ModelSpec, node: Node) -> tuple[int, str]:
    order = model.topo_order
    return (min(order.index(c) for c in node), "+".join(sorted(node)))


def _route(model: ModelSpec, nodes: tuple[Node, ...], path: frozenset[str]) -> Route:
    used = [i for i, n in enumerate(nodes) if n & path]
    return tuple(sorted(used, key=lambda i: _node_order(model, nodes[i] & path)))


def subplan_of(model: ModelSpec, nodes: tuple[Node, ...]) -> Subplan:
    """The simple subplan with exactly these nodes (covering every type they can serve)."""
    nodes = tuple(sorted(nodes, key=lambda n: _node_order(model, n)))
    sub = frozenset().union(*nodes)
    paths = [frozenset(model.request_type(t).path) for t in model.type_names]
    routes = tuple(((_route(model, nodes, p), 0),) if p <= sub else () for p in paths)
    return Subplan(nodes, routes, 1)


def simple_subplans(model: ModelSpec) -> list[Subplan]:
    types = model.type_names
    paths = [frozenset(model.request_type(t).path) for t in types]
    out: list[Subplan] = []
    for sub in path_unions(model):
        covered = [i for i, p in enumerate(paths) if p <= sub]
        for nodes in partitions(model, sub):
            routes = tuple(((_route(model, nodes, p), 0),) if i in covered else ()
                           for i, p in enumerate(paths))
            out.append(Subplan(nodes, routes, 1))
    return out


def merge(model: ModelSpec, members: tuple[Subplan, ...]) -> Subplan | None:
    """A compound of ``members`` (which must share nodes pairwise-connectedly), or None when
    it adds no alternative route."""
    nodes = tuple(sorted({n for s in members for n in s.nodes}, key=lambda n: _node_order(model, n)))
    index = {n: i for i, n in enumerate(nodes)}
    n_types = len(members[0].routes)
    per_type: list[list[tuple[Route, int]]] = [[] for _ in range(n_types)]
    for lane, s in enumerate(members):
        for t, rs in enumerate(s.routes):
            for r, _ in rs:
                mapped = tuple(index[s.nodes[i]] for i in r)
                if all(mapped != m for m, _ in per_type[t]):
                    per_type[t].append((mapped, lane))
    if all(len(rs) <= 1 for rs in per_type):
        return None
    routes = [tuple(rs) for rs in per_type]
    used = sorted({ln for rs in routes for _, ln in rs})
    relabel = {old: new for new, old in enumerate(used)}
    routes = [tuple((r, relabel[ln]) for r, ln in rs) for rs in routes]
    return Subplan(nodes, tuple(routes), len(used))


def compound_subplans(model: ModelSpec, simple: list[Subplan], k_c: int) -> list[Subplan]:
    """Merges of 2..k_c simple subplans in which every member shares a node with another."""
    out: dict[object, Subplan] = {}
    for k in range(2, k_c + 1):
        for members in itertools.combinations(simple, k):
            if not _connected(members):
                continue
            sp = merge(model, members)
            if sp is not None:
                out.setdefault(sp.key, sp)
    return list(out.values())


def _connected(members: tuple[Subplan, ...]) -> bool:
    sets = [set(s.nodes) for s in members]
    seen, stack = {0}, [0]
    while stack:
        i = stack.pop()
        for j in range(len(sets)):
            if j not in seen and sets[i] & sets[j]:
                seen.add(j)
                stack.append(j)
    return len(seen) == len(sets)


def logical_plans(subplans: list[Subplan], n_types: int, k_s: int) -> Iterator[LogicalPlan]:
    """Every multiset of 1..k_s subplans whose coverage is all types, as logical plans."""
    everything = frozenset(range(n_types))
    for k in range(1, k_s + 1):
        for combo in itertools.combinations_with_replacement(range(len(subplans)), k):
            cover: frozenset[int] = frozenset()
            for i in combo:
                cover |= subplans[i].covered
            if cover == everything:
                yield compose(tuple(subplans[i] for i in combo), n_types)


def count_logical(subplans: list[Subplan], n_types: int, k_s: int) -> int:
    """How many logical plans :func:`logical_plans` yields (without building them)."""
    full = (1 << n_types) - 1
    masks = [sum(1 << t for t in s.covered) for s in subplans]
    total = 0
    for k in range(1, k_s + 1):
        for combo in itertools.combinations_with_replacement(range(len(masks)), k):
            m = 0
            for i in combo:
                m |= masks[i]
            total += m == full
    return total
