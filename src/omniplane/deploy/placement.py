"""Executors of vLLM-Omni deployments placed onto hosts of G GPUs: omniplane.perf.hosts (the one
host placement, which the simulator and the inventory search use too) on the export's
deployments. An edge is *in-host* when every replica of both of its stages is on one host; the
others go over Mooncake (:mod:`omniplane.deploy.export_omni`). Without a host count (``--hosts``
unset) there are as many hosts of G GPUs as the placement needs. GPU indices are host-local (0..G-1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from omniplane.deploy.topology import Deployment
from omniplane.perf.hosts import HEURISTIC as HEURISTIC  # re-exported: the export names the rule
from omniplane.perf.hosts import Layout, Pipeline, Stage
from omniplane.perf.hosts import PlacementError as PlacementError  # re-exported
from omniplane.perf.hosts import place as hosts_place
from omniplane.perf.hosts import place_kinds as hosts_place_kinds

DEFAULT_HOST_GPUS = 8


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


def _pipelines(deps: list[Deployment]) -> list[Pipeline]:
    return [Pipeline(d.name, tuple(Stage(g.node, g.count, g.tp, g.gpu) for g in d.groups)) for d in deps]


def _placement(layout: Layout, gpus: int, kinds: bool) -> Placement:
    return Placement(gpus, tuple(host_name(i) for i in range(len(layout.kinds))),
                     tuple(Executor(e.pipeline, e.node, e.replica, host_name(e.host), e.gpus)
                           for e in layout.seats), layout.kinds if kinds else ())


def place(deps: list[Deployment], hosts: Hosts) -> Placement:
    """Place every executor of ``deps`` (omniplane.perf.hosts.place); raises :class:`PlacementError`."""
    return _placement(hosts_place(_pipelines(deps), hosts.gpus, hosts.count), hosts.gpus, False)


def place_kinds(deps: list[Deployment], hosts: Hosts) -> Placement:
    """:func:`place` for a plan whose stage groups run on several GPU kinds: each kind's groups
    go onto hosts of that kind only (hosts are homogeneous), with the same heuristic; edges
    between kinds cross hosts (omniplane.perf.hosts.place_kinds). One kind: :func:`place` itself."""
    if len({g.gpu for d in deps for g in d.groups}) <= 1:
        return place(deps, hosts)
    return _placement(hosts_place_kinds(_pipelines(deps), hosts.gpus, hosts.count), hosts.gpus, True)
