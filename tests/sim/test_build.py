"""Topology construction: engines per component get the executor's resources."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.sim.build import RunSetup, build_topology
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.llm import LLMEngine
from omniplane.spec import ModelSpec, PlanSpec, load_gpus, parse
from tests.spec.builders import tiny_model, tiny_plan


def test_co_hosted_llms_each_get_the_kv_tokens_the_footprint_gives_them() -> None:
    """The footprint already shares free memory so that every LLM of the executor holds the
    same number of tokens (perf.memory.footprint); the engines must not split it again."""
    model = parse(ModelSpec, tiny_model())
    doc = tiny_plan()
    doc["nodes"] = [{"name": "all", "components": ["enc", "thinker", "talker", "voc"],
                     "executors": [{"count": 1, "tp": 1, "max_batch": 16}]}]
    doc["routes"] = {"t2t": [{"nodes": ["all"], "p": 1.0}], "i2a": [{"nodes": ["all"], "p": 1.0}]}
    plan = parse(PlanSpec, doc)
    gpu = load_gpus().get("A100-80GB")
    cost = CostModel(model)
    topo = build_topology(model, plan, gpu, cost, EventLoop(), RunSetup())
    llms = [e for e in topo.executors[0].engines if isinstance(e, LLMEngine)]
    fp = cost.footprint(["enc", "thinker", "talker", "voc"], ExecutorConfig(gpu, 1, 16))
    assert [e.comp for e in llms] == ["thinker", "talker"]
    for e in llms:
        assert e.kv_capacity == fp.kv_tokens[e.comp]
    # both caches together fit in the free memory
    used = sum(fp.kv_tokens[c] * cost.shape(c).kv_bytes_per_token for c in ("thinker", "talker"))
    assert used <= fp.kv_bytes


def _encode_batches(nodes: list[dict[str, Any]], routes: list[str], token_budget: int) -> list[int]:
    """Encoder step batch sizes when 12 image requests (256 encoder tokens each) arrive at once."""
    from omniplane.sim.simulator import Simulation
    from omniplane.spec import resolve_plan
    from omniplane.spec.work import sample_work
    from tests.sim.fakes import Arrival, LinearCost, fake_cfg

    model = parse(ModelSpec, tiny_model())
    doc = tiny_plan()
    doc["nodes"] = nodes
    doc["routes"] = {"t2t": [{"nodes": [n for n in routes if n != "enc"] or routes, "p": 1.0}],
                     "i2a": [{"nodes": routes, "p": 1.0}]}
    plan = resolve_plan(parse(PlanSpec, doc), model, load_gpus())
    loop = EventLoop()
    setup = RunSetup(make_cfg=fake_cfg, trace=True, cpu_seconds=lambda c: 0.0, token_budget=token_budget)
    topo = build_topology(model, plan.spec, plan.gpu, LinearCost(), loop, setup)
    rng = np.random.default_rng(0)
    arrivals = [Arrival(i, 0.0, "i2a", sample_work(model, "i2a", rng, 1)[0]) for i in range(12)]
    res = Simulation(model, topo, arrivals, loop=loop).run()
    assert res.completed == 12
    return [b for tr in res.trace for (_, _, comp, _, b, _) in tr.steps if comp == "enc"]


def test_an_encoder_inside_an_llm_process_keeps_to_the_encoder_budget() -> None:
    """vLLM v1 bounds one step's encoder work by its encoder compute budget (equal to the token
    budget); a stand-alone encoder process batches up to its max_batch."""
    merged = [{"name": "all", "components": ["enc", "thinker", "talker", "voc"],
               "executors": [{"count": 1, "tp": 1, "max_batch": 16}]}]
    batches = _encode_batches(merged, ["all"], token_budget=600)
    assert sum(batches) == 12 and max(batches) == 2  # 2 x 256 tokens fit in 600, 3 do not
    one_each = _encode_batches(merged, ["all"], token_budget=100)  # one request always runs
    assert one_each == [1] * 12
    alone = [{"name": "enc", "components": ["enc"], "executors": [{"count": 1, "tp": 1, "max_batch": 8}]},
             {"name": "rest", "components": ["thinker", "talker", "voc"],
              "executors": [{"count": 1, "tp": 1, "max_batch": 16}]}]
    assert max(_encode_batches(alone, ["enc", "rest"], token_budget=600)) == 8


def test_a_plan_without_a_gpu_kind_needs_its_executor_configs_and_no_kv_edge() -> None:
    """An engine with no GPU kind (a measured vLLM engine) runs with ``setup.make_cfg``'s
    configs; a KV-cache edge needs the GPU kind's link bandwidth, so it is refused by name."""
    gpu = load_gpus().get("A100-80GB")
    doc = tiny_model()
    model = parse(ModelSpec, doc)
    plan = parse(PlanSpec, tiny_plan())
    cost = CostModel(model)
    with pytest.raises(ValueError, match=r"needs RunSetup\.make_cfg"):
        build_topology(model, plan, None, cost, EventLoop(), RunSetup())
    setup = RunSetup(make_cfg=lambda _gpu, tp, batch: ExecutorConfig(gpu, tp, batch))
    assert build_topology(model, plan, None, cost, EventLoop(), setup).kv_seconds_per_token == {}
    thinker = next(c for c in doc["components"] if c["name"] == "thinker")
    thinker["edges"] = [{"to": e["to"], "kv": True} for e in thinker["edges"]]
    kv_model = parse(ModelSpec, doc)
    with pytest.raises(ValueError, match="thinker's KV-cache edge needs a GPU kind"):
        build_topology(kv_model, plan, None, CostModel(kv_model), EventLoop(), setup)
    topo = build_topology(kv_model, plan, gpu, CostModel(kv_model), EventLoop(), setup)
    assert topo.kv_seconds_per_token["thinker"] > 0
