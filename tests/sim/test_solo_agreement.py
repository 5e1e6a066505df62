"""At zero load the simulator agrees with the performance model's solo latency (perf.solo):
one request alone, every catalog model and request type, monolithic and disaggregated."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.perf import CostModel
from omniplane.perf.solo import default_solo_config, request_latency
from omniplane.sim import simulate
from omniplane.spec import PlanSpec, load_gpus, load_model, load_plan, parse, resolve_plan
from omniplane.spec.catalog import catalog_dir, catalog_model_paths
from omniplane.spec.work import sample_work
from omniplane.workload import Request


def _monolithic(model_name: str, gpu: str) -> tuple:  # type: ignore[type-arg]
    model = load_model(model_name)
    cost = CostModel(model)
    cfg = default_solo_config(model, cost, load_gpus().get(gpu))
    et = model.executor_type_for([c.name for c in model.components])
    assert et is not None
    doc = {"kind": "plan", "model": model_name, "gpu": gpu, "transfer_ms": 10,
           "nodes": [{"name": "all", "components": [c.name for c in model.components],
                      "executors": [{"count": 1, "tp": cfg.tp, "max_batch": et.max_batch[0]}]}],
           "routes": {t: [{"nodes": ["all"], "p": 1.0}] for t in model.type_names}}
    return model, cost, cfg, resolve_plan(parse(PlanSpec, doc), model, load_gpus())


def _split(model_name: str, gpu: str) -> tuple:  # type: ignore[type-arg]
    """One node per component, TP 1 (a model whose components cannot all share an executor)."""
    from omniplane.perf import ExecutorConfig

    model = load_model(model_name)
    cost = CostModel(model)
    nodes = []
    for c in model.components:
        et = model.executor_type_for([c.name])
        assert et is not None, c.name
        nodes.append({"name": c.name, "components": [c.name],
                      "executors": [{"count": 1, "tp": 1, "max_batch": et.max_batch[0]}]})
    routes = {t: [{"nodes": list(model.request_type(t).path), "p": 1.0}] for t in model.type_names}
    doc = {"kind": "plan", "model": model_name, "gpu": gpu, "transfer_ms": 10, "nodes": nodes,
           "routes": routes}
    plan = resolve_plan(parse(PlanSpec, doc), model, load_gpus())
    return model, cost, {c.name: ExecutorConfig(plan.gpu, 1, 1) for c in model.components}, plan


@pytest.mark.parametrize("path", catalog_model_paths(), ids=lambda p: p.stem)
def test_one_request_alone_matches_solo_latency(path) -> None:  # type: ignore[no-untyped-def]
    gpu = "H100-SXM" if path.stem != "qwen-image" else "H200"
    merged = load_model(path.stem).executor_type_for([c.name for c in load_model(path.stem).components])
    if merged is not None:
        model, cost, cfg, plan = _monolithic(path.stem, gpu)
        cfgs, placement, transfer = {c.name: cfg for c in model.components}, None, 0.0
    else:  # no monolithic executor (the synthetic 10-component model): one node per component
        model, cost, cfgs, plan = _split(path.stem, gpu)
        placement, transfer = {c.name: c.name for c in model.components}, 0.010
    rng = np.random.default_rng(0)
    for t in model.type_names:
        for work in sample_work(model, t, rng, 3):
            res = simulate(plan, [Request(0, 0.0, t, work)], cost)
            if placement is None:
                want = request_latency(model, cost, cfgs, t, work)
            else:
                want = request_latency(model, cost, cfgs, t, work, placement, transfer_s=transfer)
            assert res.requests.first_response[0] == pytest.approx(want, rel=1e-9), (t, work)


def test_disaggregated_plan_adds_transfers_like_solo() -> None:
    plan = load_plan(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
    model, cost = plan.model, CostModel(plan.model)
    from omniplane.perf import ExecutorConfig

    cfgs = {c: ExecutorConfig(plan.gpu, 1, 1) for c in model.by_name}
    placement = {c: n.name for n in plan.spec.nodes for c in n.components}
    rng = np.random.default_rng(1)
    for t in model.type_names:
        work = sample_work(model, t, rng, 1)[0]
        res = simulate(plan, [Request(0, 0.0, t, work)], cost)
        want = request_latency(model, cost, cfgs, t, work, placement, transfer_s=0.010)
        assert res.requests.first_response[0] == pytest.approx(want, rel=1e-9), t
