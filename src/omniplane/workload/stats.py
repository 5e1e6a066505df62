"""Summaries of a run or a trace: count, duration, rate, CV of gaps, type fractions, sizes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from omniplane.workload.request import Request
from omniplane.workload.trace import Trace

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Summary:
    """``rate`` is 1 / mean gap between arrivals = (count - 1) / (last - first); ``cv`` is the
    standard deviation of the gaps over their mean (1 for Poisson)."""

    source: str
    count: int
    first_s: float
    last_s: float
    rate: float
    cv: float
    types: dict[str, float] = field(default_factory=dict)  # type -> fraction of requests
    sizes: dict[str, dict[str, float]] = field(default_factory=dict)  # name -> mean, p50, p90, p99
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return self.last_s - self.first_s

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "duration_s": self.duration_s}


def gap_stats(times: np.ndarray) -> tuple[float, float]:
    """(rate, CV) of the gaps between sorted arrival times (NaN with fewer than 3 arrivals)."""
    if len(times) < 3:
        return float("nan"), float("nan")
    gaps = np.diff(np.asarray(times, dtype=float))
    mean = float(gaps.mean())
    if mean <= 0:
        return float("inf"), float("nan")
    return 1.0 / mean, float(gaps.std(ddof=1) / mean)


def describe(values: np.ndarray) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return {}
    out = {"mean": float(v.mean())}
    for p, x in zip(PERCENTILES, np.percentile(v, PERCENTILES), strict=True):
        out[f"p{p}"] = float(x)
    return out


def summarize_requests(requests: Sequence[Request], source: str = "") -> Summary:
    times = np.array([r.arrival for r in requests], dtype=float)
    rate, cv = gap_stats(times)
    counts = Counter(r.type for r in requests)
    n = max(len(requests), 1)
    sizes: dict[str, list[float]] = {}
    for r in requests:
        for c, qs in r.work.items():
            for q, v in qs.items():
                sizes.setdefault(f"{c}.{q}", []).append(v)
    return Summary(
        source,
        len(requests),
        float(times[0]) if len(times) else 0.0,
        float(times[-1]) if len(times) else 0.0,
        rate,
        cv,
        {t: counts[t] / n for t in sorted(counts)},
        {k: describe(np.asarray(v)) for k, v in sorted(sizes.items())},
    )


def summarize_trace(trace: Trace, extra: Mapping[str, Any] | None = None) -> Summary:
    rate, cv = gap_stats(trace.arrival)
    types: dict[str, float] = {}
    if "type" in trace.meta:
        counts = Counter(trace.meta["type"])
        types = {str(t): c / len(trace) for t, c in sorted(counts.items(), key=lambda kv: str(kv[0]))}
    return Summary(
        trace.source,
        len(trace),
        float(trace.arrival[0]) if len(trace) else 0.0,
        float(trace.arrival[-1]) if len(trace) else 0.0,
        rate,
        cv,
        types,
        {k: describe(v) for k, v in sorted(trace.fields.items())},
        dict(extra or {}),
    )
