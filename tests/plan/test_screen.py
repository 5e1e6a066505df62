"""The estimate bound (omniplane.plan.screen) is admissible: on every physical plan of a small
space, per type, it is at least the Monte Carlo estimate, with and without load; and it binds
(it is below the offered rate on some Qwen3-VL plans), or it would prune nothing."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.plan.enumerate import compound_subplans, logical_plans, simple_subplans
from omniplane.plan.flow import Expansion
from omniplane.plan.montecarlo import evaluate
from omniplane.plan.routing import routing_vectors
from omniplane.plan.screen import EstimateBound
from omniplane.slo.resolve import target_array
from tests.plan.conftest import table, targets


@pytest.mark.parametrize(("workload", "gpus", "binds"), [("qwen3-vl-servegen", 4, True), ("tiny", 6, False)])
def test_bound_is_at_least_the_estimate_on_every_plan(workload: str, gpus: int, binds: bool) -> None:
    tab = table(workload)
    model = tab.model
    pi = tab.problem.pi()
    slo = target_array(targets(workload), tab.types)
    alpha = 0.8
    bound = EstimateBound(tab, pi, slo, alpha, 0.010)
    simple = simple_subplans(model)
    checked = binding = 0
    for lp in logical_plans(simple + compound_subplans(model, simple, 2), len(pi), 2):
        vecs = routing_vectors(lp, 10, 121)
        allowed = [np.arange(len(tab.node(n).options)) for n in lp.nodes]
        exp = Expansion(lp, tab, vecs, pi, gpus, allowed)
        opt, vec, top, cnt = exp.rows(0.0)
        if not len(top):
            continue
        cands = exp.elements(opt, vec, top, cnt, 0.0)
        good, _ = evaluate(cands, tab, pi, slo, alpha, 0.010)
        ub = bound.goodput(cands)
        assert (good <= ub * (1 + 1e-9) + 1e-12).all(), lp.describe()
        free = bound.goodput(cands, loaded=False)  # load-free: a bound for the whole row
        assert (ub <= free * (1 + 1e-9) + 1e-12).all(), lp.describe()
        offered = alpha * cands.rate[:, None] * pi[None, :]
        binding += int((ub.sum(axis=1) < 0.999 * offered.sum(axis=1)).sum())
        checked += len(cands)
    assert checked > 100
    assert binding > 0 or not binds  # tiny's targets are loose: every sample meets them unloaded
    assert bound.evaluated > 0
