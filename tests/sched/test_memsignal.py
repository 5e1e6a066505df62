"""The NVML-style memory-activity signal (sched/memsignal.py): a time fraction, bounded, and
the co-runner's activity joins the stage's own."""

from __future__ import annotations

import pytest
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


class _Fixed:
    """An inner co-location model whose steps take ``time_s`` (the work's overhead is its idle part)."""

    def __init__(self, time_s: float) -> None:
        self.time_s = time_s

    def stage(self, work, gpu, sms, corun_bw=0.0, *, eff=None, corun_flops=0.0):  # type: ignore[no-untyped-def]
        from omniplane.perf.colocation import StageTiming

        return StageTiming(self.time_s, 1.0e9, 1.0, 0.0, 1.0)


def _windowed(time_s: float, window_s: float = 1.0 / 6.0) -> tuple[MemoryActivity, list[float]]:
    clock = [0.0]
    return MemoryActivity(_Fixed(time_s), window_s=window_s, clock=lambda: clock[0]), clock  # type: ignore[arg-type]


def _work(active: float, time_s: float):  # type: ignore[no-untyped-def]
    from omniplane.perf.types import Work

    return Work(0.0, 1.0, overhead_s=(1.0 - active) * time_s)


def test_the_windowed_signal_is_the_union_of_the_stages_active_time_over_the_past_window() -> None:
    sig, clock = _windowed(0.1)
    assert sig.stage(_work(0.5, 0.1), ADA, 70).utilization == 0.0  # nothing ran before it
    clock[0] = 0.05
    sig.stage(_work(0.5, 0.1), ADA, 72)  # a co-runner's step, 0.05 .. 0.15
    clock[0] = 0.15
    # [0, .05]: 0.5; [.05, .1]: 1 - 0.5 * 0.5; [.1, .15]: 0.5 -> 0.0875 over 0.15 s
    assert sig.windowed(0.15) == pytest.approx((0.05 * 0.5 + 0.05 * 0.75 + 0.05 * 0.5) / 0.15)
    clock[0] = 1.0  # idle since 0.15: the past 1/6 s saw no kernel
    assert sig.windowed(1.0) == 0.0


@settings(max_examples=30, deadline=None)
@given(active=st.floats(0.0, 1.0), gaps=st.lists(st.floats(0.0, 0.2), min_size=1, max_size=30),
       window=st.floats(0.01, 1.0))
def test_one_stage_stepping_back_to_back_reads_its_active_fraction_and_gaps_lower_it(
        active: float, gaps: list[float], window: float) -> None:
    step = 0.02
    sig, clock = _windowed(step, window)
    t = 0.0
    for gap in gaps:
        v = sig.stage(_work(active, step), ADA, 70).utilization
        assert 0.0 <= v <= min(1.0, active) + 1e-9  # never above what one stage keeps busy
        t += step + gap
        clock[0] = t
    if not any(gaps) and t > window:
        assert sig.windowed(t) == pytest.approx(active, abs=1e-9)


def test_the_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window_s"):
        MemoryActivity(window_s=0.0)
