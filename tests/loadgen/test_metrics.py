"""Summaries with vllm bench serve names; goodput over the arrival span."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniplane.loadgen.metrics import COMPLETED, FAILED, LOST, SHED, Record, summarize


def _rec(i: int, t: str, arrival: float, latency: float | None, status: str = COMPLETED) -> Record:
    if status != COMPLETED or latency is None:
        return Record(i, t, arrival, arrival, status)
    return Record(
        i,
        t,
        arrival,
        arrival,
        status,
        end=arrival + 2 * latency,
        text_first=arrival + latency,
        first_response=arrival + latency,
        output_tokens=11,
    )


def test_counts_goodput_and_names() -> None:
    recs = [
        _rec(0, "a", 0.0, 0.1),
        _rec(1, "a", 1.0, 0.3),
        _rec(2, "b", 2.0, 0.05),
        _rec(3, "b", 3.0, None, FAILED),
        _rec(4, "a", 4.0, None, SHED),
        _rec(5, "b", 4.0, None, LOST),
    ]
    s = summarize(recs, {"a": 0.2, "b": 0.2})
    assert (s["sent"], s["completed"], s["failed"], s["shed"], s["lost"]) == (6, 3, 1, 1, 1)
    assert s["arrival_span"] == 4.0
    assert s["per_type"]["a"]["met_slo"] == 1 and s["per_type"]["b"]["met_slo"] == 1
    assert s["request_goodput"] == pytest.approx(2 / 4.0)
    assert s["attainment"] == pytest.approx(2 / 6)
    assert s["per_type"]["a"]["median_ttft_ms"] == pytest.approx(200.0)
    assert s["per_type"]["a"]["mean_tpot_ms"] == pytest.approx(1e3 * (0.1 + 0.3) / 2 / 10)
    for key in ("mean_ttft_ms", "p99_ttft_ms", "std_e2el_ms", "median_tpot_ms", "request_throughput"):
        assert key in s


@given(st.lists(st.floats(0.001, 10.0), min_size=1, max_size=50))
def test_percentiles_are_ordered_and_bounded(lat: list[float]) -> None:
    s = summarize([_rec(i, "a", float(i), x) for i, x in enumerate(lat)], {"a": 1.0})["per_type"]["a"]
    lo, hi = min(lat) * 1e3, max(lat) * 1e3
    vals = [
        s["p50_first_response_ms"],
        s["p90_first_response_ms"],
        s["p95_first_response_ms"],
        s["p99_first_response_ms"],
    ]
    assert vals == sorted(vals)
    assert (
        lo - 1e-6 <= s["mean_first_response_ms"] <= hi + 1e-6
        and lo - 1e-6 <= vals[0]
        and vals[-1] <= hi + 1e-6
    )
    assert s["met_slo"] == sum(1 for x in lat if x <= 1.0)
