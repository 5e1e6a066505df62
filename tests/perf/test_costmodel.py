"""Predictions that must hold by construction, for every catalog component and GPU kind."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.perf import CostModel, ExecutorConfig, InfeasibleConfig, Work
from omniplane.spec import ComponentKind, GeneratorKind, GPUCatalog, ModelSpec

GPU_NAMES = ("A100-80GB", "H100-SXM", "H200", "L40S", "RTX6000Ada", "RTXPRO6000")


def _llms(specs: dict[str, ModelSpec]) -> list[tuple[str, str]]:
    return [(m, c.name) for m, s in specs.items() for c in s.components if c.kind is ComponentKind.LLM]


@given(batch=st.integers(1, 255), ctx=st.integers(1, 4000), extra=st.integers(1, 64),
       gpu=st.sampled_from(GPU_NAMES), tp=st.sampled_from((1, 2, 4, 8)), idx=st.integers(0, 100))
@settings(max_examples=300, deadline=None)
def test_decode_time_grows_with_batch_and_context(costs: dict[str, CostModel], specs: dict[str, ModelSpec],
                                                  gpus: GPUCatalog, batch: int, ctx: int, extra: int,
                                                  gpu: str, tp: int, idx: int) -> None:
    model, comp = _llms(specs)[idx % len(_llms(specs))]
    cost, cfg = costs[model], ExecutorConfig(gpus.get(gpu), tp)
    base = cost.decode_step_time(comp, cfg, batch, batch * ctx)
    assert cost.decode_step_time(comp, cfg, batch + extra, (batch + extra) * ctx) > base
    assert cost.decode_step_time(comp, cfg, batch, batch * (ctx + extra)) > base


@given(tokens=st.integers(1, 16384), more=st.integers(1, 4096), gpu=st.sampled_from(GPU_NAMES),
       idx=st.integers(0, 100))
@settings(max_examples=200, deadline=None)
def test_prefill_time_grows_with_tokens(costs: dict[str, CostModel], specs: dict[str, ModelSpec],
                                        gpus: GPUCatalog, tokens: int, more: int, gpu: str, idx: int) -> None:
    model, comp = _llms(specs)[idx % len(_llms(specs))]
    cfg = ExecutorConfig(gpus.get(gpu), 1)
    assert costs[model].prefill_time(comp, cfg, tokens + more) > costs[model].prefill_time(comp, cfg, tokens)


def _all_ops(cost: CostModel, spec: ModelSpec, cfg: ExecutorConfig, n: int) -> list[float]:
    """One time per component of the model, for a batch of size n."""
    out = []
    for c in spec.components:
        if c.kind is ComponentKind.LLM:
            out.append(cost.llm_iteration_time(c.name, cfg, prefill_tokens=64 * n, decode_batch=n,
                                               decode_context=n * 700))
        elif c.kind is ComponentKind.ENCODER:
            out.append(cost.encoder_time(c.name, cfg, n, 300.0 * n))
        elif c.generator is GeneratorKind.DIT:
            out.append(cost.dit_step_time(c.name, cfg, n, 4096))
        elif c.generator is GeneratorKind.VAE:
            out.append(cost.vae_time(c.name, cfg, n, 1024 * 1024))
        else:
            out.append(cost.vocoder_time(c.name, cfg, n, 0.5))
    return out


@given(n=st.integers(1, 64), gpu=st.sampled_from(GPU_NAMES), model=st.sampled_from(
    ("qwen3-omni", "qwen2.5-omni", "bagel", "mimo-audio", "qwen-image", "qwen3-vl", "internvl3")),
    tp=st.sampled_from((1, 2, 4)))
@settings(max_examples=200, deadline=None)
def test_doubling_gpus_is_never_more_than_twice_as_fast(costs: dict[str, CostModel],
                                                         specs: dict[str, ModelSpec], gpus: GPUCatalog,
                                                         n: int, gpu: str, model: str, tp: int) -> None:
    kind = gpus.get(gpu)
    one = _all_ops(costs[model], specs[model], ExecutorConfig(kind, tp), n)
    two = _all_ops(costs[model], specs[model], ExecutorConfig(kind, 2 * tp), n)
    for a, b in zip(one, two, strict=True):
        assert b >= a / 2 * (1 - 1e-12)


def test_iteration_time_is_the_roofline_time_of_its_work(costs: dict[str, CostModel],
                                                          gpus: GPUCatalog) -> None:
    cost, cfg = costs["qwen3-omni"], ExecutorConfig(gpus.get("H100-SXM"), 2)
    kw = {"prefill_tokens": 300, "prefill_context": 1200, "decode_batch": 17, "decode_context": 17 * 900}
    work = cost.llm_iteration_work("thinker", cfg, **kw)
    assert cost.time_of(work, cfg) == pytest.approx(cost.llm_iteration_time("thinker", cfg, **kw))
    assert work.comm_s > 0  # TP 2 pays all-reduces
    assert cost.llm_iteration_work("thinker", cfg) == Work(0.0, 0.0, 0.0, 0.0)


def test_moe_reads_the_expected_distinct_experts(costs: dict[str, CostModel], specs: dict[str, ModelSpec],
                                                 gpus: GPUCatalog) -> None:
    """Weights read grow with batch as E * (1 - (1 - k/E)^B) distinct experts per layer."""
    size = specs["qwen3-omni"].component("thinker").size
    e, k = size.experts or 0, size.active_experts or 0
    per_expert = (size.params - size.active) / (e - k) * size.bytes_per_param
    shared = size.params * size.bytes_per_param - e * per_expert
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    for b in (1, 4, 32, 256):
        work = costs["qwen3-omni"].llm_iteration_work("thinker", cfg, decode_batch=b, decode_context=b)
        kv = size.kv_bytes_per_token() * 2 * b  # context b plus b new tokens
        expected = shared + per_expert * e * (1 - (1 - k / e) ** b) + kv
        assert work.bytes == pytest.approx(expected, rel=1e-9)


def test_guidance_doubles_the_dit_forward(costs: dict[str, CostModel], gpus: GPUCatalog) -> None:
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    cost = costs["qwen-image"]
    assert cost.guidance_passes("dit") == 2.0
    plain = CostModel(cost.model, guidance_passes={"dit": 1.0})
    doubled = cost.dit_work("dit", cfg, 1, 4096).flops
    assert doubled == pytest.approx(2 * plain.dit_work("dit", cfg, 1, 4096).flops)


def test_weights_beyond_memory_are_rejected_naming_the_executor(costs: dict[str, CostModel],
                                                                 gpus: GPUCatalog) -> None:
    cfg = ExecutorConfig(gpus.get("L40S"), 1)
    with pytest.raises(InfeasibleConfig) as info:
        costs["internvl3"].check_fits(["vision_encoder", "llm"], cfg)
    err = info.value
    msg = str(err)
    assert "vision_encoder+llm" in msg and "L40S" in msg and "x1" in msg
    assert err.needed > err.available
    assert f"{err.needed / 1e9:.2f} GB" in msg and f"{err.available / 1e9:.2f} GB" in msg
    fits = costs["internvl3"].check_fits(["llm"], ExecutorConfig(gpus.get("L40S"), 2))
    assert fits.kv_capacity_tokens > 0


def test_footprint_adds_the_weights_of_merged_components(costs: dict[str, CostModel],
                                                         gpus: GPUCatalog) -> None:
    cost, cfg = costs["qwen2.5-omni"], ExecutorConfig(gpus.get("H100-SXM"), 1)
    alone = {c: cost.footprint([c], cfg).weights_bytes for c in ("thinker", "talker", "token2wav")}
    merged = cost.footprint(["thinker", "talker", "token2wav"], cfg)
    assert merged.weights_bytes == pytest.approx(sum(alone.values()))
    assert set(merged.kv_tokens) == {"thinker", "talker"}
    assert merged.kv_capacity_tokens < cost.kv_capacity_tokens(["thinker"], cfg)
    assert cost.kv_capacity_tokens(["token2wav"], cfg) == 0


def test_kv_capacity_grows_with_tp(costs: dict[str, CostModel], gpus: GPUCatalog) -> None:
    cost = costs["qwen3-vl"]
    caps = [cost.kv_capacity_tokens(["llm"], ExecutorConfig(gpus.get("H100-SXM"), tp)) for tp in (1, 2, 4)]
    assert caps[0] < caps[1] < caps[2]


def test_wrong_component_kind_is_an_error(costs: dict[str, CostModel], gpus: GPUCatalog) -> None:
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    with pytest.raises(ValueError, match="not an llm"):
        costs["qwen-image"].decode_step_time("dit", cfg, 1, 10)
    with pytest.raises(ValueError, match="not a vae"):
        costs["qwen-image"].vae_time("dit", cfg, 1, 1e6)
    with pytest.raises(KeyError, match="no component"):
        costs["qwen-image"].decode_step_time("nope", cfg, 1, 10)


def test_executor_configs_key_dicts_by_value(gpus: GPUCatalog) -> None:
    a, b = ExecutorConfig(gpus.get("h100"), 2, 8), ExecutorConfig(gpus.get("H100-SXM"), 2, 8)
    assert a == b and hash(a) == hash(b) and len({a, b, ExecutorConfig(gpus.get("H200"), 2, 8)}) == 2
    assert a != ExecutorConfig(gpus.get("H100-SXM"), 2, 16)


def test_executor_config_is_validated(gpus: GPUCatalog) -> None:
    with pytest.raises(ValueError, match="power of two"):
        ExecutorConfig(gpus.get("A100"), 3)
    with pytest.raises(ValueError, match="max_batch"):
        ExecutorConfig(gpus.get("A100"), 1, 0)
