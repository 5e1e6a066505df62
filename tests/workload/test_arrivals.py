"""Arrival processes: rate and CV as asked, stationarity, piecewise windows, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.spec.workload import (
    GammaArrivals,
    PiecewiseArrivals,
    Poisson,
    TraceArrivals,
    WeibullArrivals,
    Window,
)
from omniplane.workload import arrival_times, gamma_shape, mean_rate, weibull_cv, weibull_shape
from omniplane.workload.arrivals import Renewal

N = 40_000  # the 100,000-arrival check is bench/bench_workload.py (docs/results/benchmarks.md)


def rate_cv(t: np.ndarray) -> tuple[float, float]:
    gaps = np.diff(t)
    return 1.0 / float(gaps.mean()), float(gaps.std(ddof=1) / gaps.mean())


def tolerances(cv: float, n: int, sigmas: float = 4.5) -> tuple[float, float]:
    """Relative tolerances for the rate and the CV estimated from n Gamma gaps.

    Rate: the mean gap has relative standard error cv / sqrt(n). CV (delta method, Gamma
    skewness 2cv and excess kurtosis 6cv^2): var(cv_hat) = cv^2 (0.5 + 0.5 cv^2) / n.
    """
    se_rate = cv / math.sqrt(n)
    se_cv = math.sqrt((0.5 + 0.5 * cv**2) / n)
    return sigmas * se_rate, sigmas * se_cv


@pytest.mark.parametrize(("spec", "cv"), [
    (Poisson(process="poisson", rate=7.0), 1.0),
    (GammaArrivals(process="gamma", rate=2.5, cv=0.5), 0.5),
    (GammaArrivals(process="gamma", rate=40.0, cv=2.0), 2.0),
])
def test_poisson_and_gamma_match_rate_and_cv(spec: Poisson | GammaArrivals, cv: float) -> None:
    t = arrival_times(spec, np.random.default_rng(12345), n=N)
    rate, got_cv = rate_cv(t)
    tol_rate, tol_cv = tolerances(cv, N)
    assert len(t) == N and np.all(np.diff(t) >= 0)
    assert rate == pytest.approx(spec.rate, rel=tol_rate)
    assert got_cv == pytest.approx(cv, rel=tol_cv)


def test_weibull_matches_rate_and_cv() -> None:
    spec = WeibullArrivals(process="weibull", rate=3.0, cv=1.8)
    t = arrival_times(spec, np.random.default_rng(7), n=N)
    rate, cv = rate_cv(t)
    assert rate == pytest.approx(3.0, rel=4.5 * 1.8 / math.sqrt(N))
    assert cv == pytest.approx(1.8, rel=0.05)  # Weibull CV estimates are heavier-tailed


@given(st.floats(min_value=0.02, max_value=20.0))
def test_weibull_shape_inverts_the_cv(cv: float) -> None:
    assert weibull_cv(weibull_shape(cv)) == pytest.approx(cv, rel=1e-9)


def test_shapes_of_known_points() -> None:
    assert gamma_shape(1.0) == 1.0 and gamma_shape(0.5) == 4.0
    assert weibull_shape(1.0) == pytest.approx(1.0, rel=1e-9)  # the exponential
    with pytest.raises(ValueError, match="outside the supported range"):
        weibull_shape(1e-5)


@pytest.mark.parametrize(("pattern", "cv"), [("gamma", 3.0), ("weibull", 3.0), ("gamma", 0.3)])
def test_expected_count_is_rate_times_length_even_in_short_windows(pattern: str, cv: float) -> None:
    """The first arrival comes after an equilibrium residual gap, so a window of two mean gaps
    holds two arrivals on average whatever the CV (a fresh first gap would give more for cv > 1)."""
    process = Renewal(1.0, cv, pattern)
    rng = np.random.default_rng(0)
    counts = np.array([len(process.times(rng, 0.0, 2.0)) for _ in range(20_000)])
    se = counts.std() / math.sqrt(len(counts))
    assert abs(counts.mean() - 2.0) < 4.5 * se


def test_duration_and_n() -> None:
    spec = GammaArrivals(process="gamma", rate=10.0, cv=1.5)
    by_time = arrival_times(spec, np.random.default_rng(1), duration_s=100.0)
    assert by_time.max() < 100.0 and 700 < len(by_time) < 1300
    both = arrival_times(spec, np.random.default_rng(1), duration_s=100.0, n=50)
    assert len(both) == 50
    assert len(arrival_times(spec, np.random.default_rng(1), n=0)) == 0
    with pytest.raises(ValueError, match="duration_s or n"):
        arrival_times(spec, np.random.default_rng(1))


def test_rate_override_keeps_cv_and_rate_scale_multiplies() -> None:
    spec = GammaArrivals(process="gamma", rate=1.0, cv=2.0)
    t = arrival_times(spec, np.random.default_rng(3), n=N, rate=50.0, rate_scale=2.0)
    rate, cv = rate_cv(t)
    tol_rate, tol_cv = tolerances(2.0, N)
    assert rate == pytest.approx(100.0, rel=tol_rate)
    assert cv == pytest.approx(2.0, rel=tol_cv)


def test_same_seed_same_times_other_seed_differs() -> None:
    spec = WeibullArrivals(process="weibull", rate=5.0, cv=0.7)
    a = arrival_times(spec, np.random.default_rng(9), n=1000)
    b = arrival_times(spec, np.random.default_rng(9), n=1000)
    c = arrival_times(spec, np.random.default_rng(10), n=1000)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def piecewise() -> PiecewiseArrivals:
    return PiecewiseArrivals(process="piecewise", windows=[
        Window(start=0, rate=2.0, cv=0.8),
        Window(start=600, rate=0.0),
        Window(start=1200, rate=8.0, cv=1.5, pattern="weibull"),
    ])


def test_piecewise_rates_per_window_and_silent_windows() -> None:
    t = arrival_times(piecewise(), np.random.default_rng(4), duration_s=1800.0)
    counts = np.histogram(t, bins=[0, 600, 1200, 1800])[0]
    assert counts[1] == 0
    assert counts[0] == pytest.approx(1200, rel=5 * 0.8 / math.sqrt(1200))
    assert counts[2] == pytest.approx(4800, rel=5 * 1.5 / math.sqrt(4800))
    assert mean_rate(piecewise()) == pytest.approx((2 * 600 + 8 * 600) / 1800)


def test_piecewise_repeats_its_period_and_cuts_at_n() -> None:
    t = arrival_times(piecewise(), np.random.default_rng(5), duration_s=3600.0)
    assert not np.any((t >= 600) & (t < 1200)) and not np.any((t >= 2400) & (t < 3000))
    assert np.any((t >= 1800) & (t < 2400))  # the second period's first window
    first = arrival_times(piecewise(), np.random.default_rng(5), n=2000)
    assert len(first) == 2000 and np.all(np.diff(first) >= 0)


def test_piecewise_rate_override_scales_every_window() -> None:
    t = arrival_times(piecewise(), np.random.default_rng(6), duration_s=1800.0, rate=20.0 / 3)
    counts = np.histogram(t, bins=[0, 600, 1200, 1800])[0]
    assert counts[1] == 0
    assert counts[2] / counts[0] == pytest.approx(4.0, rel=0.15)
    assert len(t) / 1800 == pytest.approx(20.0 / 3, rel=0.08)


def test_single_unbounded_window_gives_n() -> None:
    spec = PiecewiseArrivals(process="piecewise", windows=[Window(start=10, rate=3.0)])
    t = arrival_times(spec, np.random.default_rng(0), n=100)
    assert len(t) == 100 and t[0] >= 10


def test_all_silent_windows_is_an_error() -> None:
    # refused when the spec is built (so `validate` refuses the file), not when arrivals are drawn
    with pytest.raises(ValueError, match="rate 0"):
        PiecewiseArrivals(process="piecewise", windows=[Window(start=0, rate=0.0)], window_s=60)


def test_a_trace_is_not_generated() -> None:
    trace = TraceArrivals(process="trace", trace="azure-conv", format="azure")
    with pytest.raises(TypeError, match="replay a trace"):
        arrival_times(trace, np.random.default_rng(0), n=10)  # type: ignore[arg-type]


@settings(max_examples=25, deadline=None)
@given(rate=st.floats(0.05, 500.0), cv=st.floats(0.2, 4.0), seed=st.integers(0, 2**32 - 1))
def test_gamma_mean_gap_within_six_standard_errors(rate: float, cv: float, seed: int) -> None:
    n = 4000
    t = arrival_times(GammaArrivals(process="gamma", rate=rate, cv=cv), np.random.default_rng(seed), n=n)
    got, _ = rate_cv(t)
    assert got == pytest.approx(rate, rel=6 * cv / math.sqrt(n))
