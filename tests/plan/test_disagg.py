"""Prefill/decode disaggregation (the EPD baseline): the split model, the split work, and one
request through a split plan in the simulator."""

from __future__ import annotations

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.plan.disagg import split_llm, split_work
from omniplane.sim import EventLoop, Simulation
from omniplane.sim.build import build_topology
from omniplane.spec import PlanSpec, load_gpus, load_model, parse, resolve_plan
from omniplane.workload import Request


def test_the_split_model_hands_the_kv_cache_from_prefill_to_decode() -> None:
    split = split_llm(load_model("qwen3-vl"), "llm")
    m = split.model
    edge = next(e for e in m.component("llm").edges if e.to == "llm.decode")
    assert edge.kv and not edge.streaming and not edge.colocatable
    assert m.path_of("ti2t") == ["vision_encoder", "llm", "llm.decode"]
    assert m.executor_type_for(["llm.decode"]) is not None
    work = split_work({"llm": {"prompt_tokens": 700.0, "output_tokens": 50.0}}, "llm", "llm.decode")
    assert work == {"llm": {"prompt_tokens": 700.0, "output_tokens": 1.0},
                    "llm.decode": {"prompt_tokens": 701.0, "output_tokens": 49.0}}


def test_one_request_prefills_once_answers_at_the_prefill_and_decodes_after_the_kv_handover() -> None:
    split = split_llm(load_model("qwen3-vl"), "llm")
    model = split.model
    gpus = load_gpus()
    a100 = gpus.get("A100-80GB")
    cost = CostModel(model)
    work = split_work({"llm": {"prompt_tokens": 2000.0, "output_tokens": 20.0}}, "llm", "llm.decode")
    plan = parse(PlanSpec, {
        "kind": "plan", "model": "qwen3-vl", "gpu": "A100-80GB", "transfer_ms": 10.0,
        "nodes": [{"name": "e", "components": ["vision_encoder"],
                   "executors": [{"count": 1, "tp": 1, "max_batch": 8}]},
                  {"name": "p", "components": ["llm"], "executors": [{"count": 1, "tp": 1, "max_batch": 32}]},
                  {"name": "d", "components": ["llm.decode"],
                   "executors": [{"count": 1, "tp": 1, "max_batch": 32}]}],
        "routes": {"t2t": [{"nodes": ["p", "d"], "p": 1.0}], "ti2t": [{"nodes": ["e", "p", "d"], "p": 1.0}]}})
    resolved = resolve_plan(plan, model, gpus)
    loop = EventLoop()
    topo = build_topology(resolved.model, resolved.spec, resolved.gpu, cost, loop)
    sim = Simulation(resolved.model, topo, [Request(0, 0.0, "t2t", work, {})], loop=loop)
    res = sim.run()
    req = sim.requests[0]
    cfg = ExecutorConfig(a100, 1, 32)
    prefill = cost.llm_iteration_time("llm", cfg, prefill_tokens=2000, prefill_requests=1)
    # the first response is the prefill's first token
    assert abs((req.first_response or 0.0) - prefill) < 1e-9
    assert req.first_out["llm"] == req.first_response
    # the decode phase starts after the transfer and the prompt's KV bytes over the GPU link
    kv = model.component("llm").size.kv_bytes_per_token() * 2000 / a100.link_bw
    assert abs(req.started["llm.decode"] - (req.done["llm"] + 0.010 + kv)) < 1e-9
    # and decodes 19 tokens without prefilling the 2,001-token context again
    decode = req.done["llm.decode"] - req.started["llm.decode"]
    refill = cost.llm_iteration_time("llm.decode", cfg, prefill_tokens=2001, prefill_requests=1)
    assert decode < refill + 19 * cost.llm_iteration_time("llm.decode", cfg, decode_batch=1,
                                                          decode_context=2020)
    assert res.completed == 1 and res.failed == 0


def test_a_kv_edge_must_join_two_llm_phases() -> None:
    import pytest

    from omniplane.spec import ModelSpec, SpecError

    data = load_model("qwen3-vl").model_dump(mode="json", exclude_none=True)
    data["components"][0]["edges"] = [{"to": "llm", "kv": True}]  # vision_encoder -> llm
    with pytest.raises((SpecError, ValueError), match="kv edge joins two LLM phases"):
        parse(ModelSpec, data)
