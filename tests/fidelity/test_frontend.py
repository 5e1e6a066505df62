"""The front end as a CPU queue (omniplane.fidelity.frontend): its fit to probe points' CPU
readings, its queue, and what it does to the simulated engine. No engine needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omniplane.fidelity.compare import summarize
from omniplane.fidelity.engine import EngineConfig
from omniplane.fidelity.frontend import (
    CpuSample,
    FrontEnd,
    cpu_samples,
    fifo_waits,
    fit_frontend,
    measured_share,
    serve,
)
from omniplane.fidelity.simulate import simulate_engine
from omniplane.perf.profiler import PointMetrics
from omniplane.perf.steptime import StepModel
from omniplane.spec import ModelSpec, load_model
from omniplane.workload import Request

DATA = Path(__file__).resolve().parents[2] / "src" / "omniplane" / "fidelity" / "data"
STEP, PER_TOKEN, PER_SEQ = 0.010, 1e-4, 1e-3


@pytest.fixture(scope="module")
def model() -> ModelSpec:
    return load_model(DATA / "tiny-qwen2.yaml")


def engine() -> EngineConfig:
    return EngineConfig("http://e", "tiny-qwen2", 128, 2048, 128, 1000, 4096)


def step_model(cfg: EngineConfig) -> StepModel:
    return StepModel("llm", (STEP, PER_TOKEN, 0.0, 0.0, PER_SEQ, 0.0), cfg.limits())


def req(i: int, t: float, prompt: int, out: int) -> Request:
    return Request(i, t, "text", {"llm": {"prompt_tokens": float(prompt), "output_tokens": float(out)}})


def test_fifo_waits_serve_in_release_order_one_at_a_time() -> None:
    # released at 0, 0, 1, 1.5 with costs 1, 1, 0.2, 0.1: service starts at 0, 1, 2, 2.2
    w = fifo_waits(np.array([0.0, 0.0, 1.0, 1.5]), np.array([1.0, 1.0, 0.2, 0.1]))
    assert w == pytest.approx([0.0, 1.0, 1.0, 0.7])
    # out of order input is served by release time; two cores' speed halves every service
    w2 = fifo_waits(np.array([1.0, 0.0]), np.array([1.0, 1.0]), cores=2.0)
    assert w2 == pytest.approx([0.0, 0.0])
    assert fifo_waits(np.array([0.0, 0.0]), np.array([1.0, 1.0]), cores=2.0) == pytest.approx([0.0, 0.5])


KNOWN = FrontEnd(0.01, per_request_s=2e-3, per_prompt_token_s=1e-6, per_token_s=3e-4, per_iteration_s=5e-4)


def probe_like_samples(fe: FrontEnd) -> list[CpuSample]:
    """Samples shaped like a probe's points: concurrency-1 prefills and decode bursts."""
    out = []
    for prompt in (16, 64, 256, 1024):  # 3 requests, one token each
        out.append(CpuSample(f"prefill-{prompt}", 3, 3 * prompt, 3, 3.0, 0.0, 1.0))
    for b in (1, 4, 16, 32, 64, 128):  # 2 bursts of b streams, 32 tokens each
        out.append(CpuSample(f"decode-b{b}", 2 * b, 2 * b * 60, 2 * b * 32, 64.0, 0.0, 1.0))
    costs = np.array([fe.per_request_s, fe.per_prompt_token_s, fe.per_token_s, fe.per_iteration_s])
    return [CpuSample(s.label, s.requests, s.prompt_tokens, s.output_tokens, s.iterations,
                      float(s.features() @ costs), s.wall_s) for s in out]


def test_the_fit_recovers_a_known_front_ends_costs() -> None:
    fe = fit_frontend(probe_like_samples(KNOWN), latency_s=0.01)
    assert fe.queued and not fe.notes
    assert fe.per_request_s == pytest.approx(KNOWN.per_request_s, rel=1e-6)
    assert fe.per_prompt_token_s == pytest.approx(KNOWN.per_prompt_token_s, rel=1e-6)
    assert fe.per_token_s == pytest.approx(KNOWN.per_token_s, rel=1e-6)
    assert fe.per_iteration_s == pytest.approx(KNOWN.per_iteration_s, rel=1e-6)
    assert max(abs(r) for r in fe.residuals) < 1e-6
    back = FrontEnd.from_json(fe.to_json())
    assert back == FrontEnd(0.01, fe.per_request_s, fe.per_prompt_token_s, fe.per_token_s, fe.per_iteration_s)


def test_too_few_samples_leave_the_front_end_constant_and_say_so() -> None:
    fe = fit_frontend(probe_like_samples(KNOWN)[:3], latency_s=0.02)
    assert not fe.queued and fe.latency_s == 0.02 and "left constant" in fe.notes[0]


def test_the_runnable_share_is_cpu_over_cpu_plus_waiting_for_a_cpu() -> None:
    samples = [CpuSample("a", 1, 1, 1, 1.0, 0.1, 1.0, wait_s=0.3),
               CpuSample("b", 1, 1, 1, 1.0, 0.1, 1.0, wait_s=0.5)]
    assert measured_share(samples) == pytest.approx(0.2 / 1.0)
    assert measured_share([CpuSample("c", 1, 1, 1, 1.0, 0.1, 1.0)]) is None  # no wait readings
    assert fit_frontend(probe_like_samples(KNOWN), 0.0).cores == 1.0  # the default: one whole core


def test_cpu_samples_take_api_server_plus_client_and_iterations_per_stream() -> None:
    def point(request: str, conc: int, cpu: dict[str, float], n: int, out: int) -> PointMetrics:
        return PointMetrics(request, conc, 1.0, n, n, 0, cpu_s=cpu, wall_s=2.0, prompt_total=10 * n,
                            output_total=out)

    pts = [point("decode-16-b4", 4, {"api": 0.02, "client": 0.01, "server": 0.5, "worker": 1.0,
                                     "client_wait": 0.2, "server_wait": 0.4}, 8, 256),
           point("prefill-16", 1, {}, 3, 3),  # no meter: not a sample
           point("prefill-64", 1, {"api": 0.0, "client": 0.0}, 3, 3)]  # nothing measurable
    [s] = cpu_samples(pts)
    assert s.cpu_s == pytest.approx(0.03)  # API server + client, not the engine core nor the worker
    assert s.wait_s == pytest.approx(0.2)  # their waits only
    assert (s.requests, s.prompt_tokens, s.output_tokens, s.iterations) == (8, 80, 256, 64.0)


def test_zero_costs_are_the_constant_front_end_exactly(model: ModelSpec) -> None:
    cfg = engine()
    reqs = [req(i, 0.01 * i, 50, 20) for i in range(30)]
    const = simulate_engine(model, cfg, step_model(cfg), reqs, 0.007)
    queued = simulate_engine(model, cfg, step_model(cfg), reqs, 0.0, queue=FrontEnd(0.007))
    assert [(t.first, t.end) for t in queued] == pytest.approx([(t.first, t.end) for t in const])


def test_a_lone_request_waits_for_nothing(model: ModelSpec) -> None:
    cfg = engine()
    [bare] = simulate_engine(model, cfg, step_model(cfg), [req(0, 1.0, 100, 5)], 0.01)
    [queued] = simulate_engine(model, cfg, step_model(cfg), [req(0, 1.0, 100, 5)], 0.0, queue=KNOWN)
    assert (queued.first, queued.end) == pytest.approx((bare.first, bare.end))


def test_a_saturated_front_end_caps_throughput_below_the_engines(model: ModelSpec) -> None:
    cfg = engine()
    sm = StepModel("llm", (STEP, PER_TOKEN, 0.0, 0.0, PER_SEQ / 10, 0.0), cfg.limits())  # a fast engine
    reqs = [req(i, i * 0.002, 20, 10) for i in range(400)]  # 500 req/s offered
    engine_only = summarize(simulate_engine(model, cfg, sm, reqs, 0.0))["throughput_rps"]
    # 10 ms per request + 1 ms per token: at most 1 / (10 + 10 x 1) ms = 50 req/s through one core
    slow = FrontEnd(0.0, per_request_s=0.010, per_token_s=0.001)
    stats: dict[str, float] = {}
    capped = summarize(simulate_engine(model, cfg, sm, reqs, 0.0, stats=stats, queue=slow))["throughput_rps"]
    assert engine_only is not None and capped is not None
    assert engine_only > 100.0  # the engine alone is not the limit here
    assert capped <= 50.0 * 1.01
    assert capped >= 50.0 * 0.85
    assert 0.9 <= stats["frontend_busy"] <= 1.0 + 1e-9  # the front end is the bottleneck, never over 100%
    # and the same front end two cores wide doubles the cap
    wide = FrontEnd(0.0, per_request_s=0.010, per_token_s=0.001, cores=2.0)
    doubled = summarize(simulate_engine(model, cfg, sm, reqs, 0.0, queue=wide))["throughput_rps"]
    assert doubled is not None and doubled > 1.6 * capped


def test_tokens_released_together_wait_their_turn_and_the_last_token_sets_the_finish() -> None:
    fe = FrontEnd(0.0, per_token_s=0.001)
    # two requests emitting 3 tokens each at the same instants 0, 1, 2 s (first token at 0, finish at 2)
    s = serve(fe, np.array([0.0, 0.0]), np.array([10.0, 10.0]), np.array([0.0, 0.0]), np.array([2.0, 2.0]),
              np.array([3, 3]), np.array([2.0, 2.0]))
    assert s.admit == pytest.approx([0.0, 0.0])  # admission costs nothing here
    assert s.first == pytest.approx([0.0, 0.001])  # the second stream's token waits for the first's
    assert s.last == pytest.approx([0.0, 0.001])
    assert s.busy_s == pytest.approx(6 * 0.001)
