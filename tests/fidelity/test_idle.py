"""The cold start after idle (omniplane.fidelity.idle): its probe against a loopback server, its
fit, the engine's idle time at an arrival, and what the simulator charges for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omniplane.fidelity.engine import EngineConfig
from omniplane.fidelity.idle import ColdStart, IdlePlan, IdleSample, fit_cold, idle_before, run_idle
from omniplane.fidelity.simulate import simulate_engine
from omniplane.perf.steptime import StepModel
from omniplane.spec import load_model
from omniplane.workload import Request
from tests.perf.sse_server import Delays, serve_in_subprocess

DATA = Path(__file__).resolve().parents[2] / "src" / "omniplane" / "fidelity" / "data"


def samples(gap: float, idle: float, ttfts: list[float]) -> list[IdleSample]:
    return [IdleSample(gap, idle, t) for t in ttfts]


def test_the_cost_is_the_ttft_above_back_to_back_non_decreasing_in_idle() -> None:
    cold = fit_cold(samples(0, 1.0, [10, 10.2, 9.8]) + samples(10, 11.0, [9.0, 9.5, 9.6])
                    + samples(100, 101.0, [13, 12.8, 13.1]) + samples(300, 301.0, [12.5, 12.6, 12.4]))
    assert cold.idle_s == pytest.approx((0.001, 0.011, 0.101, 0.301))
    # 10 ms idle measured faster than back to back: no refund; 300 ms is held at 100 ms's 3 ms
    assert cold.extra_s == pytest.approx((0.0, 0.0, 0.003, 0.003))
    assert cold.samples == 12
    got = cold.cost(np.array([0.0, 0.0005, 0.056, 0.101, 5.0]))
    assert got == pytest.approx([0.0, 0.0, 0.0015, 0.003, 0.003])


def test_one_gap_is_no_cost_and_says_so() -> None:
    cold = fit_cold(samples(0, 1.0, [10.0]))
    assert cold.cost(np.array([1.0])) == pytest.approx([0.0])
    assert cold.notes and "no cold-start cost" in cold.notes[0]
    assert ColdStart.from_json(cold.to_json()).idle_s == ()


def test_idle_before_is_zero_inside_a_step_and_the_gap_after_the_last_end() -> None:
    starts, ends = np.array([2.0, 0.0, 0.5]), np.array([3.0, 1.0, 0.8])  # unsorted, one nested
    got = idle_before(starts, ends, np.array([0.0, 0.25, 0.9, 1.5, 2.0, 2.5, 3.25]))
    assert got[0] == np.inf  # the first step starts at the arrival itself: nothing ran before
    # inside a step (the nested one included), after the first, at the next step's own start
    assert got[1:] == pytest.approx([0.0, 0.0, 0.5, 1.0, 0.0, 0.25])
    assert idle_before(np.zeros(0), np.zeros(0), np.array([1.0]))[0] == np.inf


def test_the_probe_sends_each_gap_after_the_previous_answer() -> None:
    plan = IdlePlan(gaps_ms=(0.0, 50.0), rounds=2)
    with serve_in_subprocess(Delays(0.02, 0.01, 1, 0.0, frontend_s=0.005)) as url:
        result = run_idle(url, "fake", 1000, plan, 8, "t")
    assert result.error is None
    assert [s.gap_ms for s in result.samples] == [0.0, 0.0, 50.0, 50.0]
    # the idle time is the gap plus the client's own time, never less than the gap
    assert all(s.idle_ms >= s.gap_ms for s in result.samples)
    assert all(s.ttft_ms >= 20.0 for s in result.samples)  # the server's first-token delay
    assert [e["gap_ms"] for e in result.engine_ms] == [0.0, 50.0]
    assert run_idle(url, "fake", 1000, IdlePlan(gaps_ms=()), 8, "t").samples == ()


def test_only_arrivals_at_an_idle_engine_pay_by_how_long_it_idled() -> None:
    model = load_model(DATA / "tiny-qwen2.yaml")
    cfg = EngineConfig("http://e", "tiny-qwen2", 128, 2048, 128, 1000, 4096)
    step = StepModel("llm", (0.010, 1e-4, 0.0, 0.0, 1e-3, 0.0), cfg.limits())

    def req(i: int, t: float) -> Request:
        return Request(i, t, "text", {"llm": {"prompt_tokens": 50.0, "output_tokens": 20.0}})

    # request 1 arrives while request 0 decodes (busy); request 2 after 1 s of idle
    reqs = [req(0, 0.0), req(1, 0.05), req(2, 2.0)]
    cold = ColdStart((0.0, 0.1, 0.5), (0.0, 0.002, 0.004))
    stats: dict[str, float] = {}
    warm = simulate_engine(model, cfg, step, reqs, 0.0)
    got = simulate_engine(model, cfg, step, reqs, 0.0, stats=stats, cold=cold)
    extra = np.array([(g.first - w.first, g.end - w.end) for g, w in zip(got, warm, strict=True)])
    # the first arrival finds nothing ever ran (held at the largest cost), the second a busy engine
    assert extra.ravel() == pytest.approx([0.004, 0.004, 0.0, 0.0, 0.004, 0.004], abs=1e-12)
    assert stats["idle_arrivals"] == pytest.approx(2 / 3)
