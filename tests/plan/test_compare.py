"""The planner against the baselines on small instances (same pipeline, simulator, targets and
request sample), and re-planning from the same profile (Cornfigurator section 4.4)."""

from __future__ import annotations

import pytest

from omniplane.plan.compare import compare, to_json
from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner
from tests.plan.conftest import problem

SMALL = PlannerOptions(mc_samples=32, sim_requests=150, max_simulated=4)


# Issue 18's simulator fixes put the planner's pick below the vLLM baseline on qwen3-vl / 4 GPUs
# with the capped search (3.61 vs 3.84 req/s); with issue 14's search it is at least every baseline
# again (the strict xfail that marked it passed).
@pytest.mark.slow
@pytest.mark.parametrize(("workload", "gpus"), [("qwen3-vl-servegen", 4), ("qwen-image-diffusiondb", 4)])
def test_planner_is_at_least_every_baseline(workload: str, gpus: int) -> None:
    planner = Planner(problem(workload, gpus), options=SMALL)
    cmp = compare(planner)
    assert cmp.planner.spec is not None and cmp.baselines
    for b in cmp.baselines:
        # 3%: goodput over 150 simulated requests differs by that much between equivalent plans
        assert cmp.planner.total >= 0.97 * b.total, (b.name, b.total, cmp.planner.total)
    doc = to_json(cmp)
    assert set(doc["baselines"]) == {b.name for b in cmp.baselines}


def test_replan_reuses_the_profile_for_a_new_budget_and_mix() -> None:
    planner = Planner(problem("qwen3-vl-servegen", 4), options=SMALL)
    first = planner.run()
    again = planner.replan(gpus=2, mix={"t2t": 0.9, "ti2t": 0.1})
    assert again.best is not None and first.best is not None
    assert again.best.spec.total_gpus <= 2
    assert again.problem.gpus == 2 and again.problem.mix["t2t"] == pytest.approx(0.9)
    assert again.targets is first.targets  # same latency targets, not re-derived


def test_planner_is_never_below_a_baseline_of_its_own_space() -> None:
    """Baselines on the planner's own model are restrictions of its space: the comparison's
    planner answer is at least each of them, and says when it is a baseline's plan."""
    planner = Planner(problem("tiny", 3), options=SMALL)
    cmp = compare(planner)
    inside = [b for b in cmp.baselines if b.result.best is not None and b.name != "epd"]
    assert inside
    assert cmp.planner.total >= max(b.total for b in inside)
    doc = to_json(cmp)
    search = doc["plan"]["meta"]["search"]
    seeded = search["seeded_from"]
    if seeded is None:
        assert search["search_best_total"] is None
    else:
        assert cmp.planner.total == next(b.total for b in inside if b.name == seeded)
        assert search["search_best_total"] < cmp.planner.total
        assert doc["plan"]["meta"]["seeded_from"] == seeded


def test_json_lists_each_baseline_space_s_own_cuts() -> None:
    """A budget that binds in a baseline's space is that space's cut, in ``baseline_cuts`` with
    the shape of the planner's ``cuts``; a baseline the budget does not reach has none."""
    opts = PlannerOptions(mc_samples=32, sim_requests=150, max_simulated=4, mc_budget=5)
    cmp = compare(Planner(problem("tiny", 3), options=opts))
    doc = to_json(cmp)
    assert set(doc["baseline_cuts"]) == {b.name for b in cmp.baselines}
    vllm = doc["baseline_cuts"]["vllm"]
    assert any(c["kind"] == "budget" and c["phase"] == "monte_carlo" and "--mc-budget 5" in c["rule"]
               for c in vllm)
    shape = {frozenset(c) - {"example"} for c in doc["cuts"]}
    assert {frozenset(c) - {"example"} for c in vllm} <= shape
    free = to_json(compare(Planner(problem("tiny", 3), options=SMALL)))
    assert free["baseline_cuts"]["vllm"] == []
