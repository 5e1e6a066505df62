"""The mixed-iteration probe against a loopback server that reports engine prefill times."""

from __future__ import annotations

import pytest

from omniplane.fidelity.mixed import MixedPlan, run_mixed
from tests.perf.sse_server import Delays, serve_in_subprocess


def test_the_pairs_fit_the_engines_limits() -> None:
    plan = MixedPlan(decodes=(4, 64, 128, 256), chunks=(16, 2000))
    # decodes cut to max_num_seqs - 1 (the sample's request must be admitted), chunk + decodes
    # within the token budget (the chunk scheduled whole)
    assert plan.pairs(max_num_seqs=128, budget=2048) == [(4, 16), (4, 2000), (64, 16), (127, 16)]
    assert plan.burst_tokens(4, 6) == 32 + 12 * 6 and plan.burst_tokens(127, 6) == 32 + 4 * 6


def test_each_sample_is_one_requests_engine_prefill_while_the_burst_decodes() -> None:
    # the server's "engine" prefill is first - frontend = 40 ms for every request
    plan = MixedPlan(decodes=(2,), chunks=(8, 32), rounds=1, prompt=4, tokens_per_sample=40)
    with serve_in_subprocess(Delays(0.05, 0.02, 8, 0.0, frontend_s=0.01)) as url:
        # the burst decodes 32 + 2 x 40 tokens, 2.2 s: ample for two samples on a loaded host
        result = run_mixed(url, "fake", 1000, plan, max_num_seqs=8, budget=2048, salt="t")
    assert result.error is None and result.dropped == 0
    assert [(s.decodes, s.chunk) for s in result.samples] == [(2, 8), (2, 32)]
    assert all(s.latency_ms == pytest.approx(40.0, rel=1e-6) for s in result.samples)
    # the context is the burst's prompt plus the tokens its streams had when the sample was sent
    assert all(4 + 1 <= s.context < 4 + 112 for s in result.samples)
    assert result.samples[1].context > result.samples[0].context


def test_an_engine_without_prefill_times_is_a_clear_error() -> None:
    with serve_in_subprocess(Delays(0.02, 0.01, 8, 0.0)) as url:  # no prefill histogram
        result = run_mixed(url, "fake", 1000, MixedPlan(decodes=(1,), chunks=(8,), rounds=1, prompt=4),
                           max_num_seqs=8, budget=2048, salt="t")
    assert result.samples == () and result.error is not None
    assert "vllm:request_prefill_time_seconds" in result.error
