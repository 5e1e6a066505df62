"""Summaries: rate and CV of gaps, type fractions and size percentiles."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.workload import Request, Trace, summarize_requests, summarize_trace
from omniplane.workload.stats import gap_stats


def test_regular_arrivals_have_cv_zero() -> None:
    rate, cv = gap_stats(np.arange(0.0, 10.0, 0.5))
    assert rate == pytest.approx(2.0) and cv == pytest.approx(0.0)
    assert all(np.isnan(x) for x in gap_stats(np.array([1.0, 2.0])))


def test_summary_of_requests() -> None:
    reqs = [Request(i, 2.0 * i, "a" if i % 4 else "b", {"llm": {"output_tokens": float(i)}})
            for i in range(101)]
    s = summarize_requests(reqs, "x")
    assert (s.count, s.first_s, s.last_s, s.duration_s) == (101, 0.0, 200.0, 200.0)
    assert s.rate == pytest.approx(0.5) and s.cv == pytest.approx(0.0)
    assert s.types == {"a": pytest.approx(75 / 101), "b": pytest.approx(26 / 101)}
    assert s.sizes["llm.output_tokens"]["p50"] == 50.0
    assert s.to_json()["duration_s"] == 200.0


def test_summary_of_a_trace_skips_missing_values() -> None:
    tr = Trace("t", "csv", np.array([0.0, 1.0, 3.0]), {"x": np.array([1.0, np.nan, 3.0])},
               {"type": ["a", "a", "b"]})
    s = summarize_trace(tr, {"note": 1})
    assert s.sizes["x"]["mean"] == 2.0 and s.types["a"] == pytest.approx(2 / 3)
    assert s.extra == {"note": 1}
