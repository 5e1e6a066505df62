"""The search's work budgets (``mc_budget``, ``time_budget_s``): when one binds, the counts stay
within it, every plan it left out is a ``budget`` cut, and the search still answers; when it
does not bind, the search is exactly the unbudgeted one."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner, PlanResult
from omniplane.plan.screen import EstimateBound
from omniplane.slo.resolve import target_array
from tests.plan.conftest import problem

WORKLOAD, GPUS = "qwen3-vl-servegen", 4
SMALL: dict[str, Any] = {"mc_samples": 32, "sim_requests": 150}


@cache
def _run(mc_budget: int | None = None, time_budget_s: float | None = None) -> PlanResult:
    opts = PlannerOptions(**SMALL, mc_budget=mc_budget, time_budget_s=time_budget_s)
    return Planner(problem(WORKLOAD, GPUS), options=opts).run()


def _budget_cuts(res: PlanResult) -> list[dict[str, object]]:
    return [c for c in res.cuts if c["kind"] == "budget"]


def test_a_budget_that_does_not_bind_changes_nothing() -> None:
    free = _run()
    roomy = _run(mc_budget=free.counts.monte_carlo + 1)
    assert free.counts.monte_carlo > 40  # the instance is not trivial
    assert roomy.counts.to_json() == free.counts.to_json()
    assert roomy.total == free.total
    assert not _budget_cuts(roomy)


def test_a_binding_mc_budget_caps_monte_carlo_and_is_listed_as_a_cut() -> None:
    free = _run()
    budget = max(1, free.counts.monte_carlo // 4)
    cut = _run(mc_budget=budget)
    assert cut.counts.monte_carlo <= budget
    assert cut.best is not None  # it still answers with a simulated plan
    rules = [str(c["rule"]) for c in _budget_cuts(cut)]
    assert rules and all(f"--mc-budget {budget}" in r for r in rules)
    assert any(c["phase"] == "monte_carlo" or c["phase"] == "enumerate" for c in _budget_cuts(cut))
    # the unbudgeted search sees at least as much and never scores worse on the estimate
    assert free.counts.flow >= cut.counts.flow


def test_the_budget_spends_its_estimates_on_the_highest_estimate_bounds_first() -> None:
    one = _run(mc_budget=1)
    assert one.counts.monte_carlo == 1
    assert one.best is not None  # the one plan estimated is simulated
    mc = [c for c in _budget_cuts(one) if c["phase"] == "monte_carlo"]
    assert mc, one.cuts
    # the example is the best plan the budget dropped: its bound is at most the kept plan's
    planner = Planner(problem(WORKLOAD, GPUS), options=PlannerOptions(**SMALL))
    slo = target_array(planner.targets, planner.problem.types)
    bound = EstimateBound(planner.table, planner.problem.pi(), slo, planner.options.alpha, planner.transfer_s)
    b = one.best.block.cands.take(np.array([one.best.i]))
    kept = float(bound.goodput(b).sum())
    dropped = float(str(mc[0]["example"]).split("estimate bound ")[1].split(" ")[0])
    assert kept >= dropped - 0.01


def test_an_exhausted_time_budget_still_simulates_the_best_survivor() -> None:
    res = _run(time_budget_s=1e-6)
    assert res.best is not None and res.counts.simulated == 1
    assert any("time budget" in str(c["rule"]) for c in _budget_cuts(res))


def test_mc_budget_must_be_positive_or_unset() -> None:
    import pytest

    with pytest.raises(ValueError, match="mc_budget must be >= 1"):
        PlannerOptions(mc_budget=0)
    assert PlannerOptions(mc_budget=None).mc_budget is None
