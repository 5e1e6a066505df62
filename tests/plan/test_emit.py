"""Every emitted plan is valid: within the GPU budget, routing sums to 1 per type at both
levels, every type covered (a property over random problems)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniplane.plan.emit import to_spec
from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner, SimOracle
from omniplane.plan.search import Search
from omniplane.plan.select import selection_policy
from omniplane.plan.show import render
from omniplane.plan.space import FULL
from omniplane.slo.resolve import target_array
from omniplane.spec import load_gpus, resolve_plan
from tests.plan.conftest import problem, table
from tests.plan.conftest import targets as conftest_targets

WORKLOADS = ["qwen3-vl-servegen", "qwen-image-diffusiondb", "internvl3-servegen", "tiny"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(WORKLOADS), st.integers(2, 8), st.integers(1, 2), st.integers(1, 2),
       st.lists(st.floats(0.0, 1.0), min_size=8, max_size=8), st.sampled_from([0.1, 0.25, 0.5]))
def test_emitted_plans_are_valid(workload, gpus, k_c, k_s, weights, step) -> None:  # type: ignore[no-untyped-def]
    base = problem(workload, gpus)
    types = base.types
    w = np.array(weights[: len(types)]) + 1e-3
    pb = base.with_budget(gpus).with_mix({t: float(x) for t, x in zip(types, w / w.sum(), strict=True)})
    tab = table(workload)
    opts = PlannerOptions(k_c=k_c, k_s=k_s, routing_step=step, mc_samples=32, sim_requests=40,
                          max_simulated=1, mc_tolerance=0.0)
    targets = conftest_targets(workload)
    planner = Planner(pb, options=opts, table=tab, targets=targets)
    found = Search(pb, tab, FULL, opts, target_array(targets, types), 0.010, selection_policy("total"),
                   SimOracle(planner, FULL)).run()
    gpus_cat = load_gpus()
    emitted = 0
    for block in found.pool[:3]:
        for i in range(min(len(block.goodput), 5)):
            spec = to_spec(block.cands, i, pb.model, pb.gpu.name, gpus, 10.0)
            resolve_plan(spec, pb.model, gpus_cat)  # cross-document checks (coverage, hosts, options)
            assert spec.total_gpus <= gpus
            assert set(spec.routes) == set(types)
            for t, routes in spec.routes.items():
                assert abs(sum(r.p for r in routes) - 1) < 1e-6
                assert all(r.p > 0 for r in routes)
                for r in routes:
                    served = {c for n in r.nodes for c in spec.node(n).components}
                    assert set(pb.model.request_type(t).path) <= served
                    for n in r.nodes:
                        assert abs(sum(spec.node(n).group_probs(t)) - 1) < 1e-6
                    assert all(abs(p * (1 / step) - round(p * (1 / step))) < 1e-6 for p in (r.p,))
            assert render(spec)
            emitted += 1
    if found.pool:
        assert emitted >= 1
