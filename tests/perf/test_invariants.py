"""Physical limits as invariants (hypothesis, over random configs, GPUs, runtimes and SM splits).

* No modelled step moves data faster than the GPU's peak DRAM bandwidth times an efficiency
  below 1, alone or summed over co-running stages; none computes faster than peak FLOP/s (its
  SMs' share of it when SMs are split, the GPU's when MPS shares them).
* A stage on fewer SMs is never faster than on more, alone, by more than HorizonServe measured
  (5.57 / 4.65, its 120- over 80-SM decode TPOT).
* A co-runner never makes a stage faster.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniplane.perf import CostModel, ExecutorConfig, InfeasibleConfig, Work
from omniplane.perf.colocation import MAX_SOLO_PENALTY, ColocationModel
from omniplane.perf.factors import load_calibration
from omniplane.spec import ComponentKind, GeneratorKind, GPUCatalog, ModelSpec

RUNTIMES = ("roofline", "vllm", "cornserve")
SLACK = 1.0 + 1e-9
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _work(cost: CostModel, comp: str, cfg: ExecutorConfig, draw: Any) -> Work:
    c = cost.model.component(comp)
    batch = draw(st.integers(1, 64))
    if c.kind is ComponentKind.LLM:
        return cost.llm_iteration_work(comp, cfg, prefill_tokens=draw(st.integers(0, 4096)),
                                       prefill_context=draw(st.integers(0, 8192)),
                                       decode_batch=batch, decode_context=batch * draw(st.integers(1, 4096)))
    if c.kind is ComponentKind.ENCODER:
        return cost.encoder_work(comp, cfg, batch, batch * draw(st.integers(1, 4000)))
    if c.generator is GeneratorKind.DIT:
        return cost.dit_work(comp, cfg, batch, draw(st.integers(64, 8192)))
    if c.generator is GeneratorKind.VAE:
        return cost.vae_work(comp, cfg, batch, draw(st.integers(64, 2048)) ** 2)
    return cost.vocoder_work(comp, cfg, batch, draw(st.floats(0.08, 60.0)))


@st.composite
def stage_case(draw: Any, specs: dict[str, ModelSpec],
               gpus: GPUCatalog) -> tuple[CostModel, ExecutorConfig, Work]:
    name = draw(st.sampled_from(sorted(specs)))
    spec = specs[name]
    comp = draw(st.sampled_from([c.name for c in spec.components]))
    gpu = draw(st.sampled_from(gpus.gpus))
    tp = draw(st.sampled_from([1, 2, 4]))
    cost = CostModel(spec, runtime=draw(st.sampled_from(RUNTIMES)))
    cfg = ExecutorConfig(gpu, tp, 64)
    return cost, cfg, _work(cost, comp, cfg, draw)


@SETTINGS
@given(data=st.data())
def test_no_step_exceeds_peak_bandwidth_or_flops(data: Any, specs: dict[str, ModelSpec],
                                                 gpus: GPUCatalog) -> None:
    cost, cfg, work = data.draw(stage_case(specs, gpus))
    t = cost.time_of(work, cfg)
    if t <= 0:
        return
    eff = cost.efficiency(cfg)
    assert eff.memory < 1.0 and eff.compute <= 1.0
    assert work.bytes / t <= cfg.gpu.mem_bw * eff.memory * SLACK
    assert work.flops / t <= cfg.gpu.flops * eff.compute * SLACK


@SETTINGS
@given(data=st.data())
def test_colocated_stages_share_bandwidth_and_compute(data: Any, specs: dict[str, ModelSpec],
                                                      gpus: GPUCatalog) -> None:
    _, cfg, a = data.draw(stage_case(specs, gpus))
    _, _, b = data.draw(stage_case(specs, gpus))
    gpu = cfg.gpu
    model = ColocationModel()
    eff = load_calibration().for_gpu(gpu)
    cap = model.capacity(gpu)
    assert cap < gpu.mem_bw
    mps = data.draw(st.booleans())
    sa = gpu.sms if mps else data.draw(st.integers(1, gpu.sms - 1))
    sb = gpu.sms if mps else gpu.sms - sa
    ta, tb = model.pair(a, sa, b, sb, gpu, eff=eff, mps=mps)
    # alone, and both together, within what the DRAM serves
    for w, s in ((a, sa), (b, sb)):
        alone = model.stage(w, gpu, s, eff=eff)
        assert alone.bandwidth <= cap * SLACK
        assert alone.flops_rate <= gpu.flops * eff.compute * s / gpu.sms * SLACK
    assert ta.bandwidth + tb.bandwidth <= cap * SLACK
    peak_flops = gpu.flops * eff.compute
    if mps:
        assert ta.flops_rate + tb.flops_rate <= peak_flops * SLACK
    else:
        assert ta.flops_rate <= peak_flops * sa / gpu.sms * SLACK
        assert tb.flops_rate <= peak_flops * sb / gpu.sms * SLACK
    # a co-runner never helps
    assert ta.time_s >= model.stage(a, gpu, sa, eff=eff).time_s * (1 - 1e-9)
    assert tb.time_s >= model.stage(b, gpu, sb, eff=eff).time_s * (1 - 1e-9)


@SETTINGS
@given(data=st.data())
def test_fewer_sms_never_faster_than_more_beyond_the_measured_penalty(data: Any, specs: dict[str, ModelSpec],
                                                                      gpus: GPUCatalog) -> None:
    _, cfg, work = data.draw(stage_case(specs, gpus))
    gpu = cfg.gpu
    model = ColocationModel()
    eff = load_calibration().for_gpu(gpu)
    few = data.draw(st.integers(1, gpu.sms))
    more = data.draw(st.integers(few, gpu.sms))
    t_few = model.stage(work, gpu, few, eff=eff).time_s
    t_more = model.stage(work, gpu, more, eff=eff).time_s
    assert t_few * (1.0 + MAX_SOLO_PENALTY) * SLACK >= t_more


def test_full_allocation_penalty_is_the_measured_ratio_at_most(gpus: GPUCatalog) -> None:
    model = ColocationModel()
    for gpu in gpus.gpus:
        eff = load_calibration().for_gpu(gpu)
        for w in (Work(0.0, 4e9), Work(1e12, 8e9, 1e-3, 0.0)):
            times = [model.stage(w, gpu, s, eff=eff).time_s for s in range(1, gpu.sms + 1)]
            assert times[-1] <= min(times) * 5.57 / 4.65 * SLACK


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_talker_step_reads_codebooks_and_mtp_layers(specs: dict[str, ModelSpec], gpus: GPUCatalog,
                                                    runtime: str) -> None:
    spec = specs["qwen3-omni"]
    talker = spec.component("talker")
    cfg = ExecutorConfig(gpus.get("A100-80GB"), 1, 16)
    base = CostModel(spec, runtime=runtime)
    fewer = spec.model_copy(update={"components": [
        c.model_copy(update={"size": c.size.model_copy(update={"codebooks": 8})}) if c.name == "talker" else c
        for c in spec.components]})
    none = spec.model_copy(update={"components": [
        c.model_copy(update={"size": c.size.model_copy(update={"mtp_params": None, "mtp_layers": None,
                                                                "mtp_hidden": None})})
        if c.name == "talker" else c for c in spec.components]})
    step = base.decode_step_time("talker", cfg, 8, 8 * 1000)
    assert talker.size.mtp_passes == 15
    assert step > CostModel(fewer, runtime=runtime).decode_step_time("talker", cfg, 8, 8 * 1000)
    assert step > CostModel(none, runtime=runtime).decode_step_time("talker", cfg, 8, 8 * 1000)
    assert base.mtp_time("talker", cfg, 8) > 0 == CostModel(none, runtime=runtime).mtp_time("talker", cfg, 8)


def test_memory_limit_still_rejects_weights_beyond_the_gpu(specs: dict[str, ModelSpec],
                                                           gpus: GPUCatalog) -> None:
    cost = CostModel(specs["qwen3-vl"])
    with pytest.raises(InfeasibleConfig):
        cost.check_fits(["llm"], ExecutorConfig(gpus.get("L40S"), 1, 1))
