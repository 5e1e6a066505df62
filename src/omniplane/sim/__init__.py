"""Request-level discrete-event simulator for multi-component serving.

``simulate(plan, requests, cost)`` runs a workload through a physical plan and returns a
:class:`SimResult` (per-type metrics, per-executor figures, per-request records). How the plan
becomes executors for the run (policies, co-location, batch caps) is a :class:`RunSetup`; the
pieces (event loop, engines, executors, GPU sharing, policy hook, metrics) are importable for
single-GPU co-location experiments and queueing checks.
"""

from __future__ import annotations

from omniplane.sim import native

native.activate(__path__)  # the compiled hot modules when built for these sources (sim/native.py)

from collections.abc import Mapping, Sequence
from typing import Any

from omniplane.sim.build import RunSetup, build_topology
from omniplane.sim.colocate import SharedGPU
from omniplane.sim.costs import CostSource
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.metrics import SimResult, TypeMetrics
from omniplane.sim.records import RequestRecords
from omniplane.sim.simulator import Simulation
from omniplane.sim.topology import Topology
from omniplane.spec import GPUKind, ModelSpec, PlanSpec, ResolvedPlan


class SimRun:
    """A plan built for one simulation run: its event loop and its executors
    (:func:`build_topology`), for a caller that also reads the executors after the run or builds
    the loop first (a policy signal on its clock). ``gpu`` None: a plan on an engine with no GPU
    kind (``setup.make_cfg`` then gives the executor configs)."""

    def __init__(self, model: ModelSpec, plan: PlanSpec, gpu: GPUKind | None, cost: CostSource,
                 setup: RunSetup | None = None, *, loop: EventLoop | None = None) -> None:
        self.model = model
        self.loop = loop or EventLoop()
        self.topology = build_topology(model, plan, gpu, cost, self.loop, setup)

    def run(self, requests: Sequence[Any], *, seed: int = 0, slo_s: Mapping[str, float] | None = None,
            until: float | None = None) -> SimResult:
        """Run ``requests`` (``omniplane.workload.Request``-like) to the end (or to ``until``)."""
        sim = Simulation(self.model, self.topology, requests, loop=self.loop, seed=seed, slo_s=slo_s)
        return sim.run(until)


def simulate(
    plan: ResolvedPlan,
    requests: Sequence[Any],
    cost: CostSource,
    *,
    slo_s: Mapping[str, float] | None = None,
    seed: int = 0,
    setup: RunSetup | None = None,
    until: float | None = None,
) -> SimResult:
    """Run ``requests`` (``omniplane.workload.Request``-like) through ``plan``."""
    run = SimRun(plan.model, plan.spec, plan.gpu, cost, setup)
    return run.run(requests, seed=seed, slo_s=slo_s, until=until)


__all__ = [
    "CostSource",
    "EventLoop",
    "RequestRecords",
    "RunSetup",
    "SharedGPU",
    "SimResult",
    "SimRun",
    "Simulation",
    "Topology",
    "TypeMetrics",
    "build_topology",
    "simulate",
]
