"""Predicted against measured: both sides summarised the same way, errors signed."""

from __future__ import annotations

import pytest

from omniplane.fidelity.compare import METRICS, Timing, errors, measured_timings, summarize, within_targets
from omniplane.loadgen.metrics import COMPLETED, LOST, Record


def test_summary_of_a_known_run() -> None:
    # 5 requests: TTFT 0.1..0.5 s, 11 tokens, 1 s of decoding each (TPOT 0.1 s)
    runs = [Timing(float(i), i + 0.1 * (i + 1), i + 0.1 * (i + 1) + 1.0, 11) for i in range(5)]
    m = summarize(runs)
    assert set(m) == set(METRICS)
    assert m["ttft_p50_ms"] == pytest.approx(300.0)
    assert m["ttft_p95_ms"] == pytest.approx(480.0)  # linear between 400 and 500
    assert m["tpot_p50_ms"] == pytest.approx(100.0) and m["tpot_p95_ms"] == pytest.approx(100.0)
    assert m["e2e_p50_ms"] == pytest.approx(1300.0)
    assert m["throughput_rps"] == pytest.approx(5 / (4 + 0.5 + 1.0))


def test_empty_runs_and_one_token_outputs() -> None:
    assert summarize([]) == dict.fromkeys(METRICS)
    m = summarize([Timing(0.0, 0.2, 0.2, 1)])
    assert m["tpot_p50_ms"] is None and m["ttft_p50_ms"] == pytest.approx(200.0)


def test_errors_are_signed_relative_to_the_measurement() -> None:
    meas = dict.fromkeys(METRICS, 100.0)
    sim = {**meas, "ttft_p50_ms": 90.0, "tpot_p50_ms": 120.0, "e2e_p50_ms": None}
    err = errors(meas, sim)
    assert err["ttft_p50_ms"] == pytest.approx(-0.10) and err["tpot_p50_ms"] == pytest.approx(0.20)
    assert err["e2e_p50_ms"] is None and err["throughput_rps"] == 0.0
    ok = within_targets([{"measured": meas, "simulated": sim}])
    assert ok == {"throughput_rps": True, "ttft_p50_ms": True, "tpot_p50_ms": False}


def test_only_completed_requests_with_a_first_token_are_measured() -> None:
    recs = [Record(0, "text", 0.0, 0.01, COMPLETED, end=1.0, text_first=0.2, output_tokens=5),
            Record(1, "text", 0.5, 0.51, LOST, error="cut"),
            Record(2, "text", 0.7, 0.71, COMPLETED, end=0.9, text_first=None, output_tokens=0)]
    assert measured_timings(recs) == [Timing(0.01, 0.2, 1.0, 5)]


def test_ttft_decomposition_adds_up_on_both_sides() -> None:
    from omniplane.fidelity.compare import mean_ttft_ms, ttft_decomposition

    sim = [Timing(0.0, 0.05, 1.0, 10), Timing(1.0, 1.15, 2.0, 10)]
    assert mean_ttft_ms(sim) == pytest.approx(100.0)
    d = ttft_decomposition(120.0, {"ttft": 90.0, "queue": 10.0, "prefill": 60.0}, mean_ttft_ms(sim), 20.0)
    m, s = d["measured"], d["simulated"]
    assert (m["client"], m["api_server"], m["engine"]) == pytest.approx((30.0, 20.0, 70.0))
    assert m["client"] + m["api_server"] + m["queue"] + m["prefill"] == pytest.approx(m["total"])
    assert s["front_end"] + s["engine"] == pytest.approx(s["total"]) and s["engine"] == pytest.approx(80.0)
    missing = ttft_decomposition(None, {}, None, 20.0)
    assert missing["measured"]["client"] is None and missing["simulated"]["engine"] is None
