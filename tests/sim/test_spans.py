"""Decode spans (several iterations simulated as one event) give the results of
iteration-by-iteration simulation, with the real cost model on a catalog plan."""

from __future__ import annotations

import pytest

from omniplane.perf import CostModel
from omniplane.sim.build import build_topology
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.simulator import Simulation
from omniplane.spec import load_plan, load_workload
from omniplane.spec.catalog import catalog_dir
from omniplane.workload import generate


def _run(span: bool) -> tuple[Simulation, int]:
    plan = load_plan(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
    wl = load_workload(catalog_dir() / "workloads" / "qwen3-omni-servegen.yaml")
    reqs = generate(wl, n=600, rate=12, seed=3)
    loop = EventLoop()
    topo = build_topology(plan.model, plan.spec, plan.gpu, CostModel(plan.model), loop)
    for ex in topo.executors:
        ex.can_span = span
    sim = Simulation(plan.model, topo, reqs, loop=loop)
    sim.run()
    return sim, loop.events


def test_spans_are_exact_and_save_events() -> None:
    a, events_a = _run(True)
    b, events_b = _run(False)
    assert events_a < events_b / 2
    for ra, rb in zip(a.requests, b.requests, strict=True):
        assert ra.rid == rb.rid
        # the same times up to float rounding (a span sums its iteration times in another order)
        assert ra.done == pytest.approx(rb.done, rel=1e-9, abs=1e-9)
        assert ra.first_response == pytest.approx(rb.first_response, rel=1e-9, abs=1e-9)
