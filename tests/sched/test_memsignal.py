"""The NVML-style memory-activity signal (sched/memsignal.py): a time fraction, bounded, and
the co-runner's activity joins the stage's own."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.perf import ColocationModel, CostModel, ExecutorConfig
from omniplane.sched.memsignal import MemoryActivity, active_fraction
from omniplane.spec import load_gpus, load_model

MODEL = load_model("qwen2.5-omni")
COST = CostModel(MODEL, runtime="vllm")
ADA = load_gpus().get("RTX6000Ada")
CFG = ExecutorConfig(ADA, 1, 4)


def _decode(comp: str, batch: int = 4):  # type: ignore[no-untyped-def]
    return COST.llm_iteration_work(comp, CFG, decode_batch=batch, decode_context=batch * 600)


def test_alone_the_signal_is_the_kernel_time_fraction_not_the_bandwidth_fraction() -> None:
    inner, wrapped = ColocationModel(), MemoryActivity()
    work = _decode("thinker")
    raw = inner.stage(work, ADA, ADA.sms, eff=COST.efficiency(CFG))
    got = wrapped.stage(work, ADA, ADA.sms, eff=COST.efficiency(CFG))
    assert got.time_s == raw.time_s and got.bandwidth == raw.bandwidth  # timing unchanged
    assert got.utilization == active_fraction(work, raw)
    assert got.utilization == (raw.time_s - work.overhead_s - work.comm_s) / raw.time_s
    # a decode that streams weights below peak still keeps memory busy: NVML reads higher than GPM
    assert got.utilization > raw.utilization


def test_a_co_runner_adds_its_activity_to_the_stage_s() -> None:
    wrapped, eff = MemoryActivity(), COST.efficiency(CFG)
    talker = wrapped.stage(_decode("talker", 1), ADA, 90, eff=eff)
    a_talk = talker.utilization  # alone: its own active fraction
    thinker = wrapped.stage(_decode("thinker"), ADA, 52, talker.bandwidth, eff=eff)
    a_think = active_fraction(_decode("thinker"), thinker)
    assert thinker.utilization == 1 - (1 - a_think) * (1 - a_talk)
    assert max(a_think, a_talk) < thinker.utilization <= 1.0
    # an unknown draw (several co-runners summed) falls back to the draw over peak
    assert wrapped.co_runner_active(1.0e11, ADA) == 1.0e11 / ADA.mem_bw


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 16), sms=st.integers(4, ADA.sms), other=st.floats(0.0, 2.0e12))
def test_the_signal_is_a_fraction(batch: int, sms: int, other: float) -> None:
    t = MemoryActivity().stage(_decode("thinker", batch), ADA, sms, other, eff=COST.efficiency(CFG))
    assert 0.0 <= t.utilization <= 1.0
