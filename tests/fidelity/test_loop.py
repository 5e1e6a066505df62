"""The fidelity loop's simulator side and profile plan, without an engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omniplane.fidelity.calibrate import (
    Delivery,
    ProbePlan,
    capacity_spec,
    decode_streams,
    fit_delivery,
    frontend_latency,
    probe_drift,
    probe_rows,
    probe_specs,
)
from omniplane.fidelity.compare import summarize
from omniplane.fidelity.engine import EngineConfig
from omniplane.fidelity.loop import capacity
from omniplane.fidelity.simulate import simulate_engine
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


def test_the_delivery_cost_is_added_per_token_with_the_streams_in_flight(model: ModelSpec) -> None:
    cfg = engine()
    reqs = [req(0, 0.0, 10, 11)]
    [bare] = simulate_engine(model, cfg, step_model(cfg), reqs, 0.0)
    [slow] = simulate_engine(model, cfg, step_model(cfg), reqs, 0.0, Delivery(0.002, 0.001))
    assert slow.first == pytest.approx(bare.first)  # the first token is the front end's constant
    assert slow.end - bare.end == pytest.approx(10 * (0.002 + 0.001 * 1))  # alone: one stream
    two = [req(0, 0.0, 10, 11), req(1, 0.0, 10, 11)]
    slow2 = simulate_engine(model, cfg, step_model(cfg), two, 0.0, Delivery(0.0, 0.001))
    bare2 = simulate_engine(model, cfg, step_model(cfg), two, 0.0)
    ends = [t.end - u.end for t, u in zip(slow2, bare2, strict=True)]
    assert ends == pytest.approx([10 * 0.002] * 2)  # two streams decoding together


def test_decode_streams_counts_the_overlap() -> None:
    first, finish = np.array([0.0, 1.0, 5.0]), np.array([2.0, 3.0, 5.0])
    assert decode_streams(first, finish) == pytest.approx([1.5, 1.5, 1.0])


def test_probe_specs_stay_inside_the_engine_limits() -> None:
    cfg = engine(max_seqs=16, budget=512)
    specs = probe_specs(ProbePlan(), cfg, 64, capacity=True)
    prefills = [s for s in specs if s.name.startswith("prefill-")]
    assert prefills and all(s.prompt_tokens <= 512 and s.concurrency == (1,) for s in prefills)
    bursts = [s for s in specs if s.burst]
    assert bursts and all(max(s.concurrency) <= 16 for s in bursts)
    # every burst's prompts fit one iteration: its decode iterations carry no prefill
    assert all(s.prompt_tokens * s.concurrency[0] <= 512 for s in bursts)
    assert len({s.prompt_tokens for s in bursts}) >= 2  # two contexts: decode_ctx is identified
    assert {s.concurrency[0] for s in probe_specs(ProbePlan(), engine(), 64, capacity=True)} >= {64, 128}
    # every probe (not only the capacity's) reaches the batches a load near capacity decodes
    assert max(s.concurrency[0] for s in probe_specs(ProbePlan(), engine(), 64)) == 128
    quick = ProbePlan.quick()
    assert max(s.concurrency[0] for s in probe_specs(quick, engine(), 64)) == 4
    assert max(s.concurrency[0] for s in probe_specs(quick, engine(), 64, capacity=True)) == 16
    cap = capacity_spec(ProbePlan(), cfg, [(64, 24), (200, 8)])
    assert cap.concurrency == (16,) and cap.sizes == ((64, 24), (200, 8)) and cap.duration_s > 0


def _pt(name: str, c: int, ttft: float, queue: float, prefill: float, thr: float = 0.0,
        tpot: float | None = None, itl: float | None = None, prompt: float = 16.0) -> PointMetrics:
    metrics = {"ttft": {"median": ttft}} | ({"tpot": {"median": tpot}} if tpot is not None else {})
    server = {"queue": queue, "prefill": prefill} | ({"itl": itl} if itl is not None else {})
    return PointMetrics(name, c, 1.0, 3, 3, 0, metrics, thr, 0.0, server, prompt, 32.0 if tpot else 1.0)


def test_front_end_and_capacity_come_from_the_profile() -> None:
    res = SweepResult([_pt("prefill-16", 1, 0.030, 0.001, 0.020), _pt("prefill-256", 1, 0.100, 0.001, 0.087),
                       _pt("prefill-1024", 1, 0.500, 0.001, 0.480),
                       _pt("capacity", 128, 9.0, 1.0, 0.5, 12.5)], [])
    assert frontend_latency(res.points) == pytest.approx(0.012)  # median of 9, 12, 19 ms
    assert capacity(res) == 12.5
    with pytest.raises(RuntimeError, match="capacity point"):
        capacity(SweepResult(res.points[:3], []))


def test_a_lost_connection_in_the_capacity_loop_is_tolerated_up_to_one_percent() -> None:
    from dataclasses import replace

    from omniplane.fidelity.loop import _few_errors

    cap = _pt("capacity", 128, 9.0, 1.0, 0.5, 12.5)
    assert _few_errors(SweepResult([replace(cap, n_total=431, n_errors=1)], []))
    assert not _few_errors(SweepResult([replace(cap, n_total=431, n_errors=5)], []))
    assert not _few_errors(SweepResult([_pt("prefill-16", 1, 0.03, 0.0, 0.02)], []))


def test_probe_rows_are_the_engines_own_times_and_delivery_the_rest() -> None:
    pts = [_pt("prefill-64", 1, 0.050, 0.001, 0.030, prompt=64),
           _pt("decode-64-b1", 1, 0.1, 0.0, 0.03, tpot=0.012, itl=0.010, prompt=64),
           _pt("decode-64-b8", 8, 0.2, 0.0, 0.05, tpot=0.020, itl=0.012, prompt=64)]
    rows = probe_rows(pts, "llm", "cpu", "probe 0")
    assert [(r.op, r.batch, r.size, r.latency_ms) for r in rows] == [
        ("prefill", 1, 64, pytest.approx(30.0)), ("decode", 1, 80, pytest.approx(10.0)),
        ("decode", 8, 80, pytest.approx(12.0))]
    d = fit_delivery(pts)  # client TPOT - engine ITL: 2 ms at one stream, 8 ms at eight
    assert d.per_token(1) == pytest.approx(0.002) and d.per_token(8) == pytest.approx(0.008)
    assert fit_delivery(pts[:1]) == Delivery(0.0, 0.0)
    later = probe_rows([_pt("prefill-64", 1, 0.05, 0.001, 0.033, prompt=64)], "llm", "cpu", "probe 1")
    assert probe_drift(rows, later) == pytest.approx(0.1)  # 30 -> 33 ms on the one shared point


def test_the_simulated_engine_counts_its_iterations(model: ModelSpec) -> None:
    cfg = engine()
    stats: dict[str, float] = {}
    # two requests 1 s apart: each one prefill-only iteration and 4 decode-only ones
    simulate_engine(model, cfg, step_model(cfg), [req(0, 0.0, 100, 5), req(1, 1.0, 100, 5)], 0.0, stats=stats)
    assert stats["iterations"] == 10 and stats["prefill_only"] == 2 and stats["mixed"] == 0
    assert stats["tokens_per_iteration"] == pytest.approx((200 + 10) / 10)
    # the second arrives while the first decodes: its prompt joins a decode iteration
    both: dict[str, float] = {}
    reqs = [req(0, 0.0, 100, 20), req(1, 0.05, 100, 20)]
    simulate_engine(model, cfg, step_model(cfg), reqs, 0.0, stats=both)
    assert both["mixed"] == 1 and both["prefill_only"] == 1
