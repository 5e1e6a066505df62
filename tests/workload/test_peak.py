"""The busiest hour's rate percentile (omniplane.workload.peak, `plan --rate-from`)."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.errors import InputError
from omniplane.workload.peak import peak_rate


def _uniform(start: float, end: float, n: int) -> np.ndarray:
    return np.linspace(start, end, n, endpoint=False)


def test_the_busiest_hour_is_found_between_quiet_hours() -> None:
    # 3 quiet hours at 0.1 req/s around a busy hour from 7200 s to 10800 s at 2 req/s
    t = np.sort(np.concatenate([_uniform(0, 7200, 720), _uniform(7200, 10800, 7200),
                                _uniform(10800, 14400, 360)]))
    p = peak_rate(t, 50)
    assert p.start_s == pytest.approx(7200) and p.end_s == pytest.approx(10800)
    assert p.window_s == 3600 and p.bin_s == 60 and not p.whole_trace
    assert p.arrivals == 7200
    assert p.rate == pytest.approx(2.0)


def test_the_percentile_is_taken_over_the_hours_minutes() -> None:
    # one hour: minute k has k + 1 arrivals (1..60), so the minute rates are (k + 1) / 60
    t = np.sort(np.concatenate([_uniform(60 * k, 60 * (k + 1), k + 1) for k in range(60)]
                               + [np.array([3600.0 + 7200.0])]))  # a late straggler: the span is > 1 h
    p = peak_rate(t, 90)
    assert p.start_s == 0 and p.end_s == 3600
    want = np.percentile(np.arange(1, 61) / 60, 90)
    assert p.rate == pytest.approx(want)
    assert peak_rate(t, 100).rate == pytest.approx(1.0)  # the busiest minute: 60 in 60 s
    assert peak_rate(t, 50).rate < p.rate


def test_a_burst_within_the_hour_raises_the_high_percentile_not_the_median() -> None:
    base = _uniform(0, 3600, 3600)  # 1 req/s
    burst = _uniform(1800, 1860, 540)  # one minute at 10 req/s
    t = np.sort(np.concatenate([base, burst, [4000.0]]))
    assert peak_rate(t, 50).rate == pytest.approx(1.0)
    assert peak_rate(t, 100).rate == pytest.approx(10.0)


def test_a_trace_shorter_than_an_hour_is_its_whole_span() -> None:
    t = _uniform(100, 700, 1200)  # 2 req/s over 600 s
    t = np.append(t, 700.0)
    p = peak_rate(t, 99)
    assert p.whole_trace
    assert p.start_s == 100 and p.end_s == 700 and p.window_s == 600
    assert p.bin_s == pytest.approx(60) and p.arrivals == 1201
    assert p.rate == pytest.approx(2.0, abs=1 / 60)  # the last arrival lands in the last minute


@pytest.mark.parametrize("t", [[], [5.0], [3.0, 3.0]])
def test_too_few_arrivals_is_a_clear_error(t: list[float]) -> None:
    with pytest.raises(InputError, match=r"my\.csv: expected at least two arrivals"):
        peak_rate(np.array(t), 99, source="my.csv")


def test_a_bad_percentile_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="percentile"):
        peak_rate(np.array([0.0, 1.0]), 0)
