"""Physical limits as invariants (hypothesis, over random configs, GPUs, runtimes and SM splits).

* No modelled step moves data faster than the GPU's peak DRAM bandwidth times an efficiency
  below 1, alone or summed over co-running stages; none computes faster than peak FLOP/s (its
  SMs' share of it when SMs are split, the GPU's when MPS shares them).
* A stage on fewer SMs is never faster than on more, alone, by more than HorizonServe measured
  (5.57 / 4.65, its 120- over 80-SM decode TPOT).
* A co-runner never makes a stage faster.
* Time-sliced stages (no MPS) never draw more DRAM bandwidth or FLOP/s together than one of
  them alone may, their kernel time never overlaps, and none is faster than alone.
* Co-located stages under MPS or an SM split, their steps started at any offsets and re-timed
  in flight, never draw more DRAM bandwidth than the GPU serves (``C``) nor more FLOP/s than
  its peak at any instant; none is faster than alone, and a lone stage takes its solo time.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniplane.perf import CostModel, ExecutorConfig, InfeasibleConfig, Work
from omniplane.perf.colocation import MAX_SOLO_PENALTY, ColocationModel
from omniplane.perf.factors import load_calibration
from omniplane.sim.engines import Step
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.gpu import Colocated, TimeSliced, split_step
from omniplane.spec import ComponentKind, GeneratorKind, GPUCatalog, GPUKind, ModelSpec

RUNTIMES = ("roofline", "vllm", "vllm-v1", "cornserve")
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
def stage_case(draw: Any, specs: dict[str, ModelSpec], gpus: GPUCatalog,
               gpu: GPUKind | None = None) -> tuple[CostModel, ExecutorConfig, Work]:
    name = draw(st.sampled_from(sorted(specs)))
    spec = specs[name]
    comp = draw(st.sampled_from([c.name for c in spec.components]))
    gpu = gpu or draw(st.sampled_from(gpus.gpus))
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


class _Stage:
    """A stage running its steps back to back on a shared GPU (what an executor does)."""

    def __init__(self, loop: EventLoop, slot: TimeSliced | Colocated, steps: list[Step], start: float,
                 name: str = "s0") -> None:
        self.loop, self.gpu, self.steps, self.start, self.name = loop, slot, steps, start, name
        self.took: list[tuple[float, float]] = []  # (time taken, solo time) per step
        self.solo: list[float] = []  # Colocated: each step's solo time on the SMs it got
        self._version, self._i, self._t0 = 0, 0, 0.0
        loop.at(start, self._start)

    def _start(self, _: object = None) -> None:
        self._t0 = self.loop.now
        duration = self.gpu.begin(self, self.steps[self._i])  # type: ignore[arg-type]
        if isinstance(self.gpu, Colocated):
            self.solo.append(self.gpu.flight[self].solo_s)  # type: ignore[index]
        self.move_end(self._t0 + duration)

    def move_end(self, end: float) -> None:
        self._version += 1
        self.loop.at(end, self._end, self._version)

    def _end(self, version: int) -> None:
        if version != self._version:
            return
        self.gpu.end(self)  # type: ignore[arg-type]
        self.took.append((self.loop.now - self._t0, self.steps[self._i].duration))
        self._i += 1
        if self._i < len(self.steps):
            self._start()


@SETTINGS
@given(data=st.data())
def test_time_sliced_stages_share_the_gpu_time(data: Any, specs: dict[str, ModelSpec],
                                               gpus: GPUCatalog) -> None:
    gpu = data.draw(st.sampled_from(gpus.gpus))
    loop, trace = EventLoop(), []  # type: ignore[var-annotated]
    slot = TimeSliced(gpu, trace)
    stages, mem, comp, kernel_s = [], 0.0, 0.0, 0.0
    for _ in range(data.draw(st.integers(1, 3))):
        steps = []
        for _ in range(data.draw(st.integers(1, 4))):
            cost, cfg, work = data.draw(stage_case(specs, gpus, gpu=gpu))
            step = Step(cost.time_of(work, cfg), 1, "step", work=work)
            steps.append(step)
            eff = cost.efficiency(cfg)
            mem, comp = max(mem, eff.memory), max(comp, eff.compute)
            kernel_s += split_step(step)[1]
        stages.append(_Stage(loop, slot, steps, data.draw(st.floats(0.0, 0.05))))
    loop.run()
    for s in stages:
        assert len(s.took) == len(s.steps)
        # never faster than alone; exactly as fast when it is the only stage
        assert all(took >= solo * (1 - 1e-9) - 1e-12 for took, solo in s.took)
        if len(stages) == 1:
            assert all(took == pytest.approx(solo, rel=1e-9, abs=1e-12) for took, solo in s.took)
    # together never beyond what one stage alone may draw (peak x its efficiency, below peak)
    assert mem < 1.0
    for _, share, bw, flops in trace:
        assert share <= 1.0
        assert bw <= gpu.mem_bw * mem * SLACK
        assert flops <= gpu.flops * comp * SLACK
    # kernel time of different stages never overlaps: it fits between the first start and the end
    assert kernel_s <= (loop.now - min(s.start for s in stages)) * SLACK + 1e-12


@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_colocated_stages_never_exceed_the_dram_or_peak_flops_in_flight(
        data: Any, specs: dict[str, ModelSpec], gpus: GPUCatalog) -> None:
    gpu = data.draw(st.sampled_from(gpus.gpus))
    mode = data.draw(st.sampled_from(["mps", "split"]))
    model, eff = ColocationModel(), load_calibration().for_gpu(gpu)
    loop, trace = EventLoop(), []  # type: ignore[var-annotated]
    slot = Colocated(mode, gpu, eff, model, "s0", trace)
    stages = []
    for k in range(data.draw(st.integers(1, 3))):
        steps = []
        for _ in range(data.draw(st.integers(1, 4))):
            cost, cfg, work = data.draw(stage_case(specs, gpus, gpu=gpu))
            cap = data.draw(st.one_of(st.none(), st.integers(1, gpu.sms))) if k == 0 else None
            steps.append(Step(cost.time_of(work, cfg), 1, "step", sm_cap=cap, work=work))
        stages.append(_Stage(loop, slot, steps, data.draw(st.floats(0.0, 0.05)), f"s{k}"))
    loop.run()
    for s in stages:
        assert len(s.took) == len(s.steps) == len(s.solo)
        # never faster than alone on its SMs; exactly its solo time when it is the only stage
        assert all(took >= solo * (1 - 1e-9) - 1e-12 for (took, _), solo in zip(s.took, s.solo, strict=True))
        if len(stages) == 1:
            assert all(took == pytest.approx(solo, rel=1e-9, abs=1e-12)
                       for (took, _), solo in zip(s.took, s.solo, strict=True))
    # at every instant, all stages together within what the DRAM serves and the GPU computes
    assert trace
    for _, bw, flops in trace:
        assert bw <= model.capacity(gpu) * SLACK
        assert flops <= gpu.flops * eff.compute * SLACK


def test_two_memory_bound_streams_started_apart_share_the_dram(gpus: GPUCatalog) -> None:
    """The case the start-time timing got wrong: two 20 GB streams on an A100 started 5 ms apart
    drew 1.22x the DRAM's capacity together while both ran. Re-timed in flight, they share it."""
    gpu = gpus.get("A100-80GB")
    model, eff = ColocationModel(), load_calibration().for_gpu(gpu)
    loop, trace = EventLoop(), []  # type: ignore[var-annotated]
    slot = Colocated("mps", gpu, eff, model, "s0", trace)
    work = Work(0.0, 20e9)
    alone = model.stage(work, gpu, gpu.sms, eff=eff).time_s
    a = _Stage(loop, slot, [Step(alone, 1, "step", work=work)], 0.0, "s0")
    b = _Stage(loop, slot, [Step(alone, 1, "step", work=work)], 0.005, "s1")
    loop.run()
    both = [bw for _, bw, _ in trace]
    assert max(both) <= model.capacity(gpu) * SLACK
    assert max(both) > 0.9 * model.capacity(gpu)  # and they do use it
    # each is slower than alone, and the pair moves 40 GB no faster than C allows
    assert a.took[0][0] > alone and b.took[0][0] > alone
    assert loop.now >= 40e9 / model.capacity(gpu) * (1 - 1e-9)
