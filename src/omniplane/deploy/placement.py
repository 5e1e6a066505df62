"""Executors of vLLM-Omni deployments placed onto hosts of G GPUs.

An executor is one replica of a plan node's stages on ``tp`` GPUs of one host (its TP group
never spans hosts). The heuristic keeps the streaming edges of a pipeline (thinker -> talker ->
code2wav) inside a host where it can:

1. deployments are placed largest first;
2. a deployment that fits on one host goes whole onto the host with the least free GPUs that
   holds it (best fit), so all of its edges stay inside that host;
3. one that no host holds is laid out in pipeline order (the first stage's executors, then the
   next stage's), filling the host with the most free GPUs before moving on to the next: the
   pipeline is cut into as few host-sized segments as the hosts allow, each segment's edges in
   one host. An edge is *in-host* when every replica of both of its stages is on one host;
   the others go over Mooncake (:mod:`omniplane.deploy.export_omni`).

Without a host count (``--hosts`` unset) there are as many hosts of G GPUs as the placement
needs. GPU indices are host-local (0..G-1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from omniplane.deploy.topology import Deployment, StageGroup

DEFAULT_HOST_GPUS = 8
HEURISTIC = (
    "largest deployment first; a deployment that fits on one host goes whole onto the host with "
    "the least free GPUs that holds it (best fit: every streaming edge inside the host); one that "
    "no host holds is laid out in pipeline order, filling the host with the most free GPUs before "
    "the next, so the pipeline is cut at as few edges as the hosts allow"
)


class PlacementError(ValueError):
    """The deployments do not fit on the hosts."""


@dataclass(frozen=True)
class Hosts:
    count: int | None  # None: as many as needed
    gpus: int

    @classmethod
    def parse(cls, text: str | None) -> Hosts:
        """``HxG`` (``2x8``: 2 hosts of 8 GPUs), ``xG`` or ``None`` (hosts of 8 GPUs, as many as needed)."""
        if text is None:
            return cls(None, DEFAULT_HOST_GPUS)
        m = re.fullmatch(r"\s*(\d*)\s*[xX]\s*(\d+)\s*", text)
        if not m or (m.group(1) and int(m.group(1)) < 1) or int(m.group(2)) < 1:
            raise ValueError(f"--hosts {text!r}: expected HOSTSxGPUS, e.g. 2x8 (2 hosts of 8 GPUs each)")
        return cls(int(m.group(1)) if m.group(1) else None, int(m.group(2)))


def host_name(i: int) -> str:
    return f"host{i}"


@dataclass(frozen=True)
class Executor:
    """One replica of a stage group: host and host-local GPU indices."""

    deployment: str
    node: str
    replica: int
    host: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Placement:
    host_gpus: int
    hosts: tuple[str, ...]
    executors: tuple[Executor, ...]
    kinds: tuple[str, ...] = ()  # per host: its GPU kind (a plan on several kinds; empty: the plan's)

    def kind_of(self, host: str) -> str:
        return self.kinds[self.hosts.index(host)] if self.kinds else ""

    def of(self, deployment: str, node: str | None = None) -> list[Executor]:
        return [e for e in self.executors
                if e.deployment == deployment and (node is None or e.node == node)]

    def hosts_of(self, deployment: str, node: str | None = None) -> list[str]:
        """The hosts a deployment (a node of it) uses, in host order."""
        used = {e.host for e in self.of(deployment, node)}
        return [h for h in self.hosts if h in used]

    def gpus_on(self, deployment: str, host: str) -> list[int]:
        """The host-local GPUs a deployment uses on ``host``, ascending."""
        return sorted({g for e in self.of(deployment) if e.host == host for g in e.gpus})

    def edge_in_host(self, deployment: str, a: str, b: str) -> bool:
        """Whether every replica of nodes ``a`` and ``b`` of ``deployment`` is on one host."""
        return len({e.host for e in self.of(deployment) if e.node in (a, b)}) == 1


def place(deps: list[Deployment], hosts: Hosts) -> Placement:
    """Place every executor of ``deps`` (module docstring); raises :class:`PlacementError`."""
    G = hosts.gpus
    for d in deps:
        for g in d.groups:
            if g.tp > G:
                raise PlacementError(
                    f"deployment {d.name}, node {g.node}: TP {g.tp} needs {g.tp} GPUs of one host, but "
                    f"hosts have {G} (--hosts {hosts.count or ''}x{G})")
    free: list[list[int]] = [list(range(G)) for _ in range(hosts.count or 0)]
    out: list[Executor] = []

    def new_host() -> int | None:
        if hosts.count is not None:
            return None
        free.append(list(range(G)))
        return len(free) - 1

    def take(h: int, d: Deployment, g: StageGroup, r: int) -> None:
        got, free[h][:] = free[h][: g.tp], free[h][g.tp:]
        out.append(Executor(d.name, g.node, r, host_name(h), tuple(got)))

    for d in sorted(deps, key=lambda d: -d.gpus):  # stable: plan order among equals
        fits = [h for h in range(len(free)) if len(free[h]) >= d.gpus]
        h = min(fits, key=lambda h: len(free[h])) if fits else (new_host() if d.gpus <= G else None)
        if h is not None:
            for g in d.groups:
                for r in range(g.count):
                    take(h, d, g, r)
            continue
        cur: int | None = None
        for g in d.groups:
            for r in range(g.count):
                if cur is None or len(free[cur]) < g.tp:
                    room = [h for h in range(len(free)) if len(free[h]) >= g.tp]
                    cur = max(room, key=lambda h: len(free[h])) if room else new_host()
                    if cur is None:
                        total = hosts.count * G if hosts.count else 0
                        need = sum(x.gpus for x in deps)
                        raise PlacementError(
                            f"the plan's {len(deps)} deployment(s) need {need} GPUs in TP groups "
                            f"({', '.join(f'{x.name}: {x.gpus}' for x in deps)}); {hosts.count} host(s) "
                            f"of {G} GPUs ({total}) do not hold them (deployment {d.name}, node {g.node} "
                            "left over); "
                            "give more hosts with --hosts")
                take(cur, d, g, r)
    order = {(d.name, g.node): (i, j) for i, d in enumerate(deps) for j, g in enumerate(d.groups)}
    out.sort(key=lambda e: (order[(e.deployment, e.node)], e.replica))
    return Placement(G, tuple(host_name(i) for i in range(len(free))), tuple(out))


def place_kinds(deps: list[Deployment], hosts: Hosts) -> Placement:
    """:func:`place` for a plan whose stage groups run on several GPU kinds: each kind's groups
    go onto hosts of that kind only (hosts are homogeneous), with the same heuristic; edges
    between kinds cross hosts. One kind: :func:`place` itself."""
    from dataclasses import replace

    kinds = list(dict.fromkeys(g.gpu for d in deps for g in d.groups))
    if len(kinds) <= 1:
        return place(deps, hosts)
    if hosts.count is not None:
        named = ", ".join(k or "the plan's gpu" for k in kinds)
        raise PlacementError(f"the plan runs on {len(kinds)} GPU kinds ({named}): give --hosts xG (as many "
                             "hosts of each kind as needed), not a host count")
    names: list[str] = []
    host_kinds: list[str] = []
    out: list[Executor] = []
    for kind in kinds:
        part = [Deployment(d.name, tuple(g for g in d.groups if g.gpu == kind)) for d in deps]
        sub = place([d for d in part if d.groups], hosts)
        rename = {h: host_name(len(names) + i) for i, h in enumerate(sub.hosts)}
        names += [rename[h] for h in sub.hosts]
        host_kinds += [kind] * len(sub.hosts)
        out += [replace(e, host=rename[e.host]) for e in sub.executors]
    order = {(d.name, g.node): (i, j) for i, d in enumerate(deps) for j, g in enumerate(d.groups)}
    out.sort(key=lambda e: (order[(e.deployment, e.node)], e.replica))
    return Placement(hosts.gpus, tuple(names), tuple(out), tuple(host_kinds))
