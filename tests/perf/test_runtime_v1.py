"""The runtime factors vLLM-Omni's CI calibrates: bandwidth fraction, per-sequence time and the
MoE expert pool (routing skew), and their physical limits."""

from __future__ import annotations

import pytest

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.perf.factors import load_calibration
from omniplane.perf.runtime import Runtime
from omniplane.spec import GPUCatalog, ModelSpec


def _cost(spec: ModelSpec, **factors: object) -> CostModel:
    cal = load_calibration()
    rt = cal.runtime("vllm").with_factors(name="trial", **factors)
    return CostModel(spec, calibration=cal.with_runtime(rt), runtime="trial")


def test_uniform_pool_and_unset_overrides_leave_prices_unchanged(specs: dict[str, ModelSpec],
                                                                  gpus: GPUCatalog) -> None:
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1, 64)
    base = CostModel(specs["qwen3-omni"], runtime="vllm")
    same = _cost(specs["qwen3-omni"], moe_expert_pool=1.0, memory=None, per_seq_s=None)
    for b in (1, 8, 64):
        ctx = b * 1000
        assert same.decode_step_time("thinker", cfg, b, ctx) == base.decode_step_time("thinker", cfg, b, ctx)


def test_a_skewed_pool_reads_fewer_experts_but_never_fewer_than_one_tokens_top_k(
        specs: dict[str, ModelSpec], gpus: GPUCatalog) -> None:
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1, 64)
    uniform = _cost(specs["qwen3-omni"])
    skewed = _cost(specs["qwen3-omni"], moe_expert_pool=0.25)
    tightest = _cost(specs["qwen3-omni"], moe_expert_pool=1e-6)  # below top-k / experts: clamped
    # one token reads its top-k experts whatever the skew
    assert skewed.decode_step_time("thinker", cfg, 1, 100) == pytest.approx(
        uniform.decode_step_time("thinker", cfg, 1, 100))
    assert tightest.decode_step_time("thinker", cfg, 1, 100) == pytest.approx(
        uniform.decode_step_time("thinker", cfg, 1, 100))
    for b in (8, 32, 64):
        t = {n: c.decode_step_time("thinker", cfg, b, b * 100)
             for n, c in (("uniform", uniform), ("skewed", skewed), ("tightest", tightest))}
        assert t["tightest"] <= t["skewed"] < t["uniform"]
    # a dense model has no experts to skip
    dense = specs["qwen2.5-omni"]
    assert _cost(dense, moe_expert_pool=0.25).decode_step_time("thinker", cfg, 32, 3200) == \
        _cost(dense).decode_step_time("thinker", cfg, 32, 3200)


def test_shipped_v1_decode_is_never_faster_than_reading_the_active_weights_at_peak(
        specs: dict[str, ModelSpec], gpus: GPUCatalog) -> None:
    spec = specs["qwen3-omni"]
    cost = CostModel(spec, runtime="vllm-v1")
    for gpu in ("H100-SXM", "A100-80GB", "H200"):
        kind = gpus.get(gpu)
        cfg = ExecutorConfig(kind, 1, 64)
        shape = cost.shape("thinker")
        k_over_e = shape.active_experts / shape.experts
        floor = (shape.shared_bytes + shape.expert_bytes * k_over_e) / kind.mem_bw
        assert cost.decode_step_time("thinker", cfg, 1, 100) > floor
        # and batch 64 never reads more than every expert once at peak plus its fixed costs
        kv = 64 * 3000 * shape.kv_bytes_per_token
        everything = (shape.shared_bytes + shape.expert_bytes + kv) / kind.mem_bw
        assert cost.decode_step_time("thinker", cfg, 64, 64 * 3000) < everything + 0.01


@pytest.mark.parametrize(("field", "value"), [("memory", 0.0), ("memory", 1.5), ("per_seq_s", -1.0),
                                              ("moe_expert_pool", 0.0), ("moe_expert_pool", 1.2)])
def test_out_of_range_factors_are_refused_by_name(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        Runtime("x", "test", **{field: value})
    with pytest.raises(ValueError, match=field):
        Runtime.from_json("x", {"source": "test", field: value}, "cal.json")


def test_the_code_predictors_host_work_overlaps_the_talkers_gpu_step(specs: dict[str, ModelSpec],
                                                                   gpus: GPUCatalog) -> None:
    """``mtp_seq_pass_s`` is host work beside the GPU (async scheduling): an iteration takes the
    larger of the GPU's step and passes x sequences x ``mtp_seq_pass_s``, never their sum; the
    Work, the iteration price, the decode span and ``mtp_time`` agree on it."""
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1, 128)
    spec = specs["qwen3-omni"]
    gpu_only = _cost(spec, mtp_seq_pass_s=0.0)
    passes = spec.component("talker").size.mtp_passes
    assert passes > 0
    seq_s = 2e-4
    overl = _cost(spec, mtp_seq_pass_s=seq_s)
    for b in (1, 4, 16, 64, 128):
        ctx = b * 3000
        g = gpu_only.decode_step_time("talker", cfg, b, ctx)
        floor = passes * b * seq_s
        t = overl.decode_step_time("talker", cfg, b, ctx)
        assert t == pytest.approx(max(g, floor), rel=1e-9)
        span = overl.llm_decode_span("talker", cfg, b, ctx, 400)
        ends, acc = [], 0.0
        for i in range(400):
            acc += overl.decode_step_time("talker", cfg, b, ctx + i * b)
            ends.append(acc)
        for j in (1, 2, 57, 399, 400):
            assert span.end(j) == pytest.approx(ends[j - 1], rel=1e-9)
        assert overl.mtp_time("talker", cfg, b) >= floor - 1e-15
    # a host floor below the GPU's step changes nothing; above it, the step is the floor
    assert overl.decode_step_time("talker", cfg, 1, 3000) == gpu_only.decode_step_time("talker", cfg, 1, 3000)
    assert overl.decode_step_time("talker", cfg, 128, 128 * 3000) == pytest.approx(passes * 128 * seq_s)
