"""Request-level discrete-event simulator for multi-component serving.

``simulate(plan, requests, cost)`` runs a workload through a physical plan; the pieces
(event loop, engines, executors, GPU sharing, policy hook, metrics) are importable for
single-GPU co-location experiments and queueing checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from omniplane.policy import Policy
from omniplane.sim.build import build_topology
from omniplane.sim.costs import CostSource
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.metrics import SimResult, TypeMetrics
from omniplane.sim.simulator import Simulation
from omniplane.sim.topology import Topology
from omniplane.spec import ResolvedPlan


def simulate(
    plan: ResolvedPlan,
    requests: Sequence[Any],
    cost: CostSource,
    *,
    slo_s: Mapping[str, float] | None = None,
    seed: int = 0,
    trace: bool = False,
    policy_for: Callable[[str, str], Policy | None] | None = None,
) -> tuple[SimResult, Simulation]:
    """Run ``requests`` (``omniplane.workload.Request``-like) through ``plan``."""
    loop = EventLoop()
    topo = build_topology(plan.model, plan.spec, plan.gpu, cost, loop, trace=trace,
                          policy_for=policy_for)
    sim = Simulation(plan.model, topo, requests, seed=seed, slo_s=slo_s, loop=loop)
    return sim.run(), sim


__all__ = [
    "CostSource",
    "EventLoop",
    "SimResult",
    "Simulation",
    "Topology",
    "TypeMetrics",
    "build_topology",
    "simulate",
]
