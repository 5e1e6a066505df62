"""Topology construction: engines per component get the executor's resources."""

from __future__ import annotations

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
