"""Latency targets resolved in the plan space searched (docs/decisions/0019-targets-in-runtime-space.md):
with ``--runtime vllm-omni`` an ``isolated_percentile`` policy takes each type's isolated best among
the whole-pipeline deployments vLLM-Omni builds, priced as that space is priced."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from omniplane.perf import CostModel
from omniplane.plan.costs import CostTable
from omniplane.plan.isolated import deployments, isolated_best, unpadded
from omniplane.plan.runtime import Setup, pricing_runtime, setup
from omniplane.plan.space import FULL
from omniplane.slo.resolve import resolve_targets, space_targets
from omniplane.spec import IsolatedPercentileSLO
from omniplane.spec.load import load_layout
from tests.plan.conftest import problem

WL = "qwen3-omni-servegen"


@cache
def _setups() -> tuple[Setup, Setup]:
    """The vllm-omni and ideal setups of one problem, priced as ``omniplane plan`` prices them."""
    pb = problem(WL, 4)
    out = []
    for name in ("vllm-omni", "ideal"):
        cost = CostModel(pb.model, runtime=pricing_runtime(name))
        out.append(setup(name, pb, cost, CostTable(pb, cost), k_s=2))
    return out[0], out[1]


def test_ideal_targets_are_todays() -> None:
    _, ideal = _setups()
    policy = ideal.table.problem.workload.spec.slo
    assert space_targets(ideal, policy) == resolve_targets(policy, ideal.table, ideal.table.cost)
    assert space_targets(ideal, policy) == resolve_targets(policy, ideal.table, ideal.table.cost, space=FULL)
    assert ideal.targets_space().startswith("ideal")


def test_runtime_candidates_are_whole_pipeline_deployments_of_whole_stages() -> None:
    rt, _ = _setups()
    model = rt.table.model
    layout = load_layout(model.name)
    assert layout is not None
    stages = [frozenset(st.components) for st in layout.stages]
    every = {c.name for c in model.components}
    for t in rt.table.types:
        cands = deployments(rt.table, t, rt.space)
        assert cands
        for d in cands:
            assert d.whole
            nodes = d.route + d.idle
            assert set().union(*nodes) == every  # the whole pipeline, idle stages included
            for n in nodes:  # every node a union of whole stages
                assert n == frozenset().union(*(s for s in stages if s & n))
            assert set(model.path_of(t)) <= set().union(*d.route)


def test_runtime_targets_are_the_percentile_of_the_best_runtime_deployment() -> None:
    rt, _ = _setups()
    policy = rt.table.problem.workload.spec.slo
    assert isinstance(policy, IsolatedPercentileSLO)
    got = space_targets(rt, policy)
    alone = unpadded(rt.table, rt.table.cost)
    for t in rt.table.types:
        lat, desc = isolated_best(alone, t, 0.010, deployments(alone, t, rt.space))
        assert got.targets_ms[t] == pytest.approx(np.percentile(lat, policy.percentile) * 1e3)
        assert got.how[t].endswith(f"in the {rt.space.name} space")
        assert "thinker" in desc and "audio_encoder" in desc  # the thinker stage loads every encoder



def test_a_command_without_a_planner_resolves_in_the_plans_space() -> None:
    """``sim run`` / ``rehearse`` with ``--slo 'isolated p25'`` on a vLLM-Omni plan: the targets
    ``omniplane plan`` would resolve in that space (its ``meta.runtime.name``)."""
    from omniplane.plan.options import PlannerOptions
    from omniplane.plan.problem import make_problem
    from omniplane.slo.resolve import command_targets, plan_runtime
    from omniplane.spec import SLOChoice, load_gpus

    rt, _ = _setups()
    wl = rt.table.problem.workload
    gpu = load_gpus().get("A100-80GB")
    opts = PlannerOptions()
    cost = CostModel(wl.model, runtime=pricing_runtime("vllm-omni"))
    pb = make_problem(wl, gpu, 4, samples=opts.mc_samples, seed=opts.seed)
    planner_side = space_targets(setup("vllm-omni", pb, cost, CostTable(pb, cost), opts.k_s, opts.seed),
                                 wl.spec.slo)
    choice = SLOChoice(base=IsolatedPercentileSLO())
    name = plan_runtime({"runtime": {"name": "vllm-omni"}})
    got, _ = command_targets(choice, wl, stored=None, gpu=gpu, gpus=4, cost=cost, runtime=name)
    assert got.targets_ms == pytest.approx(planner_side.targets_ms)
    ideal, _ = command_targets(choice, wl, stored=None, gpu=gpu, gpus=4, cost=cost, runtime=plan_runtime({}))
    assert ideal.targets_ms != got.targets_ms  # a plan without meta.runtime: the ideal space, as before
