"""Logical (sub)plans: nodes (sets of components one executor hosts) and, per request type,
the alternative routes (node sequences) that serve it (Cornfigurator section 4.2).

Node *instances* are positions in ``LogicalPlan.nodes``: two subplans composed side by side
keep their own instances even when they host the same components. Each route belongs to a
*lane* (the simple subplan it came from), which the routing grid uses to tie splits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

Node = frozenset[str]
Route = tuple[int, ...]  # node instance indices, in path order


@dataclass(frozen=True)
class Subplan:
    """A simple or compound logical subplan.

    ``nodes`` are sorted canonically; ``routes[t]`` lists (route, lane) pairs for each covered
    type index ``t`` (an empty tuple: not covered). A simple subplan has one lane.
    """

    nodes: tuple[Node, ...]
    routes: tuple[tuple[tuple[Route, int], ...], ...]
    lanes: int = 1

    @cached_property
    def key(self) -> tuple[frozenset[Node], tuple[frozenset[frozenset[Node]], ...]]:
        """Identity independent of node order and lane numbering."""
        per_type = tuple(frozenset(frozenset(self.nodes[i] for i in r) for r, _ in rs) for rs in self.routes)
        return frozenset(self.nodes), per_type

    @property
    def covered(self) -> frozenset[int]:
        return frozenset(t for t, rs in enumerate(self.routes) if rs)

    @property
    def compound(self) -> bool:
        return self.lanes > 1


@dataclass(frozen=True)
class RouteClass:
    """Types that share the same alternative routes (they share routing variables)."""

    types: tuple[int, ...]
    routes: tuple[Route, ...]
    lanes: tuple[int, ...]  # lane of each route


@dataclass(frozen=True)
class LogicalPlan:
    """Composed subplans: node instances and per-type routes over them."""

    nodes: tuple[Node, ...]
    routes: tuple[tuple[Route, ...], ...]  # per type index
    lanes: tuple[tuple[int, ...], ...]  # lane of each route, per type index
    subplans: tuple[Subplan, ...]
    n_lanes: int
    subplan_of: tuple[int, ...] = field(default=())  # subplan index of each node instance
    group_of: tuple[int, ...] = field(default=())  # per instance: the instance it is a second executor
    # group of (-1: none); a node with two executor groups routes each type between them
    # independently of its route (Cornfigurator 4.2, executor-level routing)

    @cached_property
    def classes(self) -> tuple[RouteClass, ...]:
        """Routing classes: types with two or more routes, grouped by identical route sets."""
        groups: dict[tuple[Route, ...], list[int]] = {}
        lanes: dict[tuple[Route, ...], tuple[int, ...]] = {}
        for t, rs in enumerate(self.routes):
            if len(rs) > 1:
                groups.setdefault(rs, []).append(t)
                lanes[rs] = self.lanes[t]
        return tuple(RouteClass(tuple(ts), rs, lanes[rs]) for rs, ts in groups.items())

    @property
    def single_route(self) -> bool:
        return not self.classes

    @property
    def kind(self) -> str:
        if len(self.subplans) > 1:
            return "composed"
        return "compound" if self.subplans[0].compound else "simple"

    def describe(self) -> str:
        parts = []
        for s in self.subplans:
            parts.append(" | ".join("+".join(sorted(n)) for n in s.nodes))
        out = " || ".join(f"[{p}]" for p in parts)
        grouped = [k for k, g in enumerate(self.group_of) if g >= 0]
        if grouped:
            out += " with two executor groups at " + ", ".join("+".join(sorted(self.nodes[self.group_of[k]]))
                                                              for k in grouped)
        return out

    def with_group(self, n: int) -> tuple[LogicalPlan, tuple[tuple[tuple[int, int], ...], ...]]:
        """This plan with a second executor group at node instance ``n`` (a new instance
        ``len(nodes)``): every route through ``n`` is doubled. Also returns, per type and new
        route, ``(old route, group)``: group 0 is ``n``, 1 the new instance, -1 not through ``n``."""
        m = len(self.nodes)
        routes: list[tuple[Route, ...]] = []
        lanes: list[tuple[int, ...]] = []
        origin: list[tuple[tuple[int, int], ...]] = []
        for t, rs in enumerate(self.routes):
            new_r: list[Route] = []
            new_l: list[int] = []
            came: list[tuple[int, int]] = []
            for r, route in enumerate(rs):
                if n in route:
                    new_r += [route, tuple(m if x == n else x for x in route)]
                    new_l += [self.lanes[t][r]] * 2
                    came += [(r, 0), (r, 1)]
                else:
                    new_r.append(route)
                    new_l.append(self.lanes[t][r])
                    came.append((r, -1))
            routes.append(tuple(new_r))
            lanes.append(tuple(new_l))
            origin.append(tuple(came))
        groups = (*(self.group_of or tuple([-1] * m)), n)
        owner = (*self.subplan_of, self.subplan_of[n]) if self.subplan_of else ()
        plan = LogicalPlan((*self.nodes, self.nodes[n]), tuple(routes), tuple(lanes), self.subplans,
                           self.n_lanes, owner, groups)
        return plan, tuple(origin)


def compose(subplans: tuple[Subplan, ...], n_types: int) -> LogicalPlan:
    """Side-by-side composition (common entry and exit): node instances are not shared."""
    nodes: list[Node] = []
    owner: list[int] = []
    routes: list[list[Route]] = [[] for _ in range(n_types)]
    lanes: list[list[int]] = [[] for _ in range(n_types)]
    lane_base = 0
    for s_idx, s in enumerate(subplans):
        base = len(nodes)
        nodes.extend(s.nodes)
        owner.extend([s_idx] * len(s.nodes))
        for t, rs in enumerate(s.routes):
            for r, lane in rs:
                routes[t].append(tuple(base + i for i in r))
                lanes[t].append(lane_base + lane)
        lane_base += s.lanes
    return LogicalPlan(tuple(nodes), tuple(tuple(r) for r in routes), tuple(tuple(lane) for lane in lanes),
                       subplans, lane_base, tuple(owner))
