"""Decode spans (several iterations simulated as one event) give the results of
iteration-by-iteration simulation, with the real cost model on a catalog plan."""

from __future__ import annotations

import pytest

from omniplane.perf import CostModel
from omniplane.sim import RunSetup, SimResult, simulate
from omniplane.spec import load_plan, load_workload
from omniplane.spec.catalog import catalog_dir
from omniplane.workload import generate


def _run(span: bool) -> SimResult:
    plan = load_plan(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
    wl = load_workload(catalog_dir() / "workloads" / "qwen3-omni-servegen.yaml")
    reqs = generate(wl, n=600, rate=12, seed=3)
    return simulate(plan, reqs, CostModel(plan.model), setup=RunSetup(spans=span))


def test_spans_are_exact_and_save_events() -> None:
    a, b = _run(True), _run(False)
    assert a.events < b.events / 2
    ra, rb = a.requests, b.requests
    assert (ra.rid == rb.rid).all()
    # the same times up to float rounding (a span sums its iteration times in another order)
    for c in ra.done:
        assert ra.done[c] == pytest.approx(rb.done[c], rel=1e-9, abs=1e-9, nan_ok=True)
    assert ra.first_response == pytest.approx(rb.first_response, rel=1e-9, abs=1e-9)
