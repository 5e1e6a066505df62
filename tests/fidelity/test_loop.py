"""The fidelity loop's simulator side and profile plan, without an engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from omniplane.fidelity.compare import summarize
from omniplane.fidelity.engine import EngineConfig
from omniplane.fidelity.loop import (
    ProfilePlan,
    capacity,
    frontend_latency,
    profile_specs,
    simulate_engine,
)
from omniplane.perf.profiler import PointMetrics, SweepResult
from omniplane.perf.steptime import StepModel
from omniplane.spec import ModelSpec, load_model
from omniplane.workload import Request

DATA = Path(__file__).resolve().parents[2] / "src" / "omniplane" / "fidelity" / "data"
STEP, PER_TOKEN, PER_SEQ = 0.010, 1e-4, 1e-3  # s per step, per prompt token, per decoding sequence
FRONT = 0.005


@pytest.fixture(scope="module")
def model() -> ModelSpec:
    return load_model(DATA / "tiny-qwen2.yaml")


def engine(max_seqs: int = 128, budget: int = 2048) -> EngineConfig:
    return EngineConfig("http://e", "tiny-qwen2", max_seqs, budget, 128, 1000, 4096)


def step_model(cfg: EngineConfig) -> StepModel:
    return StepModel("llm", (STEP, PER_TOKEN, 0.0, 0.0, PER_SEQ, 0.0), cfg.limits())


def req(i: int, t: float, prompt: int, out: int) -> Request:
    return Request(i, t, "text", {"llm": {"prompt_tokens": float(prompt), "output_tokens": float(out)}})


def test_one_request_alone_takes_its_iterations_plus_the_front_end(model: ModelSpec) -> None:
    cfg = engine()
    [t] = simulate_engine(model, cfg, step_model(cfg), [req(0, 1.0, 100, 5)], FRONT)
    prefill = STEP + 100 * PER_TOKEN
    decode = STEP + PER_SEQ
    assert t.start == 1.0 and t.output_tokens == 5
    assert t.first - t.start == pytest.approx(prefill + FRONT)
    assert t.end - t.first == pytest.approx(4 * decode)


def test_a_prompt_over_the_token_budget_is_chunked(model: ModelSpec) -> None:
    cfg = engine(budget=2048)
    [t] = simulate_engine(model, cfg, step_model(cfg), [req(0, 0.0, 3000, 2)], 0.0)
    assert t.first - t.start == pytest.approx(2 * STEP + 3000 * PER_TOKEN)  # two chunks


def test_the_batch_limit_holds_the_third_request_back(model: ModelSpec) -> None:
    cfg = engine(max_seqs=2)
    ts = simulate_engine(model, cfg, step_model(cfg), [req(i, 0.0, 10, 50) for i in range(3)], 0.0)
    assert len(ts) == 3
    first = sorted(t.first for t in ts)
    assert first[2] > max(t.end for t in ts[:2]) - 1e-9  # it starts when one of the two finishes


def test_an_overloaded_engine_saturates_at_its_capacity(model: ModelSpec) -> None:
    cfg = engine(max_seqs=8)
    sm = step_model(cfg)
    light = summarize(simulate_engine(model, cfg, sm, [req(i, i * 1.0, 10, 10) for i in range(20)], 0.0))
    heavy = summarize(simulate_engine(model, cfg, sm, [req(i, i * 0.001, 10, 10) for i in range(400)], 0.0))
    # 8 sequences per decode iteration of STEP + 8 PER_SEQ: at most 8 / (10 x 18 ms) req/s
    assert heavy["throughput_rps"] is not None and light["throughput_rps"] is not None
    assert heavy["throughput_rps"] <= 8 / (10 * (STEP + 8 * PER_SEQ)) * 1.01
    assert heavy["ttft_p95_ms"] > light["ttft_p95_ms"]  # type: ignore[operator]


def test_profile_specs_stay_inside_the_engine_limits() -> None:
    cfg = engine(max_seqs=16, budget=512)
    specs, cap = profile_specs(ProfilePlan(), cfg, [(64, 24), (200, 8)], 64)
    prefills = [s for s in specs if s.name.startswith("prefill-")]
    assert all(s.prompt_tokens <= 512 and s.concurrency == (1,) for s in prefills)
    bursts = [s for s in specs if s.burst]
    assert bursts and all(max(s.concurrency) <= 16 for s in bursts)
    assert {s.prompt_tokens for s in bursts} == {64, 1024}  # two contexts: decode_ctx is identified
    assert cap.concurrency == (16,) and cap.sizes == ((64, 24), (200, 8)) and cap.duration_s > 0


def test_front_end_and_capacity_come_from_the_profile() -> None:
    def pt(name: str, c: int, ttft: float, queue: float, prefill: float, thr: float = 0.0) -> PointMetrics:
        return PointMetrics(name, c, 1.0, 3, 3, 0, {"ttft": {"median": ttft}}, thr, 0.0,
                            {"queue": queue, "prefill": prefill})

    res = SweepResult([pt("prefill-16", 1, 0.030, 0.001, 0.020), pt("prefill-256", 1, 0.100, 0.001, 0.087),
                       pt("prefill-1024", 1, 0.500, 0.001, 0.480),
                       pt("capacity", 128, 9.0, 1.0, 0.5, 12.5)], [])
    assert frontend_latency(res) == pytest.approx(0.012)  # median of 9, 12, 19 ms
    assert capacity(res) == 12.5
    with pytest.raises(RuntimeError, match="capacity point"):
        capacity(SweepResult(res.points[:3], []))
