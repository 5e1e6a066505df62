"""Executor groups placed onto hosts of G GPUs of their kind: omniplane's one host placement. The
simulator decides with it which edges of a mixed-fleet plan cross hosts (omniplane.sim.build),
the inventory search prices its candidates' links with it (omniplane.plan.inventory_links), and
the export writes it out (omniplane.deploy.placement).

A pipeline is a deployment's stage groups in pipeline order (thinker -> talker -> code2wav);
an executor is one replica of a group on ``tp`` GPUs of one host (its TP group never spans
hosts). Hosts are homogeneous: each kind's groups go onto hosts of that kind, with the same
heuristic (:data:`HEURISTIC`):

1. pipelines are placed largest first;
2. a pipeline that fits on one host goes whole onto the host with the least free GPUs that
   holds it (best fit), so all of its edges stay inside that host;
3. one that no host holds is laid out in pipeline order (the first group's executors, then the
   next group's), filling the host with the most free GPUs before moving on to the next: the
   pipeline is cut into as few host-sized segments as the hosts allow, each segment's edges in
   one host, and a group's replicas on as few hosts as that order allows.

An edge is *in-host* when every replica of both of its groups is on one host
(:meth:`Layout.in_host`); the others cross hosts. Without a host count there are as many hosts
of G GPUs as the placement needs. GPU indices are host-local (0..G-1).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

HEURISTIC = (
    "largest deployment first; a deployment that fits on one host goes whole onto the host with "
    "the least free GPUs that holds it (best fit: every streaming edge inside the host); one that "
    "no host holds is laid out in pipeline order, filling the host with the most free GPUs before "
    "the next, so the pipeline is cut at as few edges as the hosts allow"
)


class PlacementError(ValueError):
    """The executors do not fit on the hosts."""


@dataclass(frozen=True)
class Stage:
    """One stage group of a pipeline: ``count`` executors of ``tp`` GPUs of ``kind``."""

    node: str
    count: int
    tp: int
    kind: str = ""

    @property
    def gpus(self) -> int:
        return self.count * self.tp


@dataclass(frozen=True)
class Pipeline:
    name: str
    stages: tuple[Stage, ...]  # in pipeline order

    @property
    def gpus(self) -> int:
        return sum(s.gpus for s in self.stages)


@dataclass(frozen=True)
class Seat:
    """One executor: its pipeline, group, replica, host (an index) and host-local GPUs."""

    pipeline: str
    node: str
    replica: int
    host: int
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Layout:
    kinds: tuple[str, ...]  # per host: its kind
    seats: tuple[Seat, ...]

    def hosts_of(self, pipeline: str, node: str) -> set[int]:
        return {s.host for s in self.seats if s.pipeline == pipeline and s.node == node}

    def in_host(self, pipeline: str, a: str, b: str) -> bool:
        """Whether every replica of groups ``a`` and ``b`` of ``pipeline`` is on one host."""
        return len(self.hosts_of(pipeline, a) | self.hosts_of(pipeline, b)) == 1


def place(pipes: Sequence[Pipeline], gpus: int, count: int | None = None) -> Layout:
    """Every executor of ``pipes`` on ``count`` hosts of ``gpus`` GPUs (None: as many as needed),
    one kind (module docstring); raises :class:`PlacementError`."""
    G = gpus
    for d in pipes:
        for g in d.stages:
            if g.tp > G:
                raise PlacementError(
                    f"deployment {d.name}, node {g.node}: TP {g.tp} needs {g.tp} GPUs of one host, but "
                    f"hosts have {G} (--hosts {count or ''}x{G})")
    free: list[list[int]] = [list(range(G)) for _ in range(count or 0)]
    out: list[Seat] = []

    def new_host() -> int | None:
        if count is not None:
            return None
        free.append(list(range(G)))
        return len(free) - 1

    def take(h: int, d: Pipeline, g: Stage, r: int) -> None:
        got, free[h][:] = free[h][: g.tp], free[h][g.tp:]
        out.append(Seat(d.name, g.node, r, h, tuple(got)))

    for d in sorted(pipes, key=lambda d: -d.gpus):  # stable: plan order among equals
        fits = [h for h in range(len(free)) if len(free[h]) >= d.gpus]
        h = min(fits, key=lambda h: len(free[h])) if fits else (new_host() if d.gpus <= G else None)
        if h is not None:
            for g in d.stages:
                for r in range(g.count):
                    take(h, d, g, r)
            continue
        cur: int | None = None
        for g in d.stages:
            for r in range(g.count):
                if cur is None or len(free[cur]) < g.tp:
                    room = [h for h in range(len(free)) if len(free[h]) >= g.tp]
                    cur = max(room, key=lambda h: len(free[h])) if room else new_host()
                    if cur is None:
                        total = count * G if count else 0
                        need = sum(x.gpus for x in pipes)
                        raise PlacementError(
                            f"the plan's {len(pipes)} deployment(s) need {need} GPUs in TP groups "
                            f"({', '.join(f'{x.name}: {x.gpus}' for x in pipes)}); {count} host(s) "
                            f"of {G} GPUs ({total}) do not hold them (deployment {d.name}, node {g.node} "
                            "left over); "
                            "give more hosts with --hosts")
                take(cur, d, g, r)
    order = {(d.name, g.node): (i, j) for i, d in enumerate(pipes) for j, g in enumerate(d.stages)}
    out.sort(key=lambda e: (order[(e.pipeline, e.node)], e.replica))
    kind = next((g.kind for d in pipes for g in d.stages), "")
    return Layout((kind,) * len(free), tuple(out))


def place_kinds(pipes: Sequence[Pipeline], gpus: int | Mapping[str, int], count: int | None = None
                ) -> Layout:
    """:func:`place` for pipelines whose groups run on several kinds: each kind's groups go onto
    hosts of that kind only (``gpus``: GPUs per host, one for all kinds or per kind), as many as
    needed; edges between kinds cross hosts. One kind: :func:`place` itself (on ``count`` hosts)."""
    kinds = list(dict.fromkeys(g.kind for d in pipes for g in d.stages))

    def size(kind: str) -> int:
        return gpus if isinstance(gpus, int) else gpus[kind]

    if len(kinds) <= 1:
        return place(pipes, size(kinds[0]) if kinds else (gpus if isinstance(gpus, int) else 1), count)
    if count is not None:
        named = ", ".join(k or "the plan's gpu" for k in kinds)
        raise PlacementError(f"the plan runs on {len(kinds)} GPU kinds ({named}): give --hosts xG (as many "
                             "hosts of each kind as needed), not a host count")
    host_kinds: list[str] = []
    out: list[Seat] = []
    for kind in kinds:
        part = [Pipeline(d.name, tuple(g for g in d.stages if g.kind == kind)) for d in pipes]
        sub = place([d for d in part if d.stages], size(kind))
        out += [Seat(e.pipeline, e.node, e.replica, e.host + len(host_kinds), e.gpus) for e in sub.seats]
        host_kinds += [kind] * len(sub.kinds)
    order = {(d.name, g.node): (i, j) for i, d in enumerate(pipes) for j, g in enumerate(d.stages)}
    out.sort(key=lambda e: (order[(e.pipeline, e.node)], e.replica))
    return Layout(tuple(host_kinds), tuple(out))


def pipeline_order(topo: Sequence[str], nodes: Sequence[Collection[str]]) -> list[int]:
    """Indices of ``nodes`` (each a set of components) in pipeline order: by their first component
    in ``topo`` (the model's components in topological order); ties keep their order."""
    rank = {c: i for i, c in enumerate(topo)}
    return sorted(range(len(nodes)), key=lambda i: min((rank.get(c, len(rank)) for c in nodes[i]),
                                                        default=len(rank)))
