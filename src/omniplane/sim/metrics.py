"""What a simulation measures: per request type first-response latency (TTFT / TTFO / E2E),
end-to-end latency, TPOT, SLO attainment and goodput; per executor utilisation and queue
length over time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from omniplane.sim.records import RequestRecords
from omniplane.sim.stats import ExecutorStats

__all__ = ["ExecutorStats", "ExecutorTrace", "SimResult", "TypeMetrics", "summarise"]


def _pct(values: Sequence[float] | np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


@dataclass(frozen=True)
class TypeMetrics:
    arrived: int
    completed: int
    met_slo: int
    latency_ms: dict[str, float | None]  # first-response: mean, p50, p90, p95, p99
    e2e_ms: dict[str, float | None]
    tpot_ms: dict[str, float | None]  # of the type's last LLM: p50, p95
    attainment: float | None
    goodput: float  # requests/s meeting the SLO over the measurement window


@dataclass(frozen=True)
class ExecutorTrace:
    """The steps one executor ran (when the run was traced): (start, end, component, kind, batch,
    iterations); a decode span is one step of several iterations."""

    name: str
    node: str
    steps: tuple[tuple[float, float, str, str, int, int], ...]


@dataclass(frozen=True)
class SimResult:
    window_s: float
    horizon_s: float
    per_type: dict[str, TypeMetrics]
    executors: dict[str, dict[str, Any]]
    arrived: int
    completed: int  # including failed
    failed: int
    in_flight: int
    events: int
    wall_s: float
    requests: RequestRecords = field(repr=False)
    trace: tuple[ExecutorTrace, ...] = field(default=(), repr=False)  # with RunSetup(trace=True)

    @property
    def goodput(self) -> float:
        return sum(m.goodput for m in self.per_type.values())

    @property
    def attainment(self) -> float | None:
        arrived = sum(m.arrived for m in self.per_type.values())
        return sum(m.met_slo for m in self.per_type.values()) / arrived if arrived else None

    def to_json(self) -> dict[str, Any]:
        return {
            "window_s": self.window_s,
            "horizon_s": self.horizon_s,
            "arrived": self.arrived,
            "completed": self.completed,
            "failed": self.failed,
            "in_flight": self.in_flight,
            "goodput": self.goodput,
            "attainment": self.attainment,
            "per_type": {t: m.__dict__ for t, m in self.per_type.items()},
            "executors": self.executors,
            "events": self.events,
            "wall_s": self.wall_s,
            "events_per_s": self.events / self.wall_s if self.wall_s > 0 else None,
        }


def _stats_ms(values: np.ndarray) -> dict[str, float | None]:
    ms = values * 1e3
    if not len(ms):
        return {"mean": None, "p50": None, "p90": None, "p95": None, "p99": None}
    p50, p90, p95, p99 = (float(x) for x in np.percentile(ms, [50, 90, 95, 99]))  # one sort
    return {"mean": float(np.mean(ms)), "p50": p50, "p90": p90, "p95": p95, "p99": p99}


def summarise(
    records: RequestRecords,
    slo_s: Mapping[str, float] | None,
    window: tuple[float, float],
    tpot_component: Mapping[str, str | None],
) -> dict[str, TypeMetrics]:
    """Per-type metrics over requests that arrived within ``window``; a request that has not
    produced its first response counts as missing its SLO."""
    lo, hi = window
    span = max(hi - lo, 1e-12)
    inside = (records.arrival >= lo) & (records.arrival <= hi)
    lat_all = records.latency()
    e2e_all = records.finish - records.arrival
    out: dict[str, TypeMetrics] = {}
    for t in sorted(set(records.type[inside].tolist())):
        rs = inside & (records.type == t)
        lat = lat_all[rs & ~np.isnan(records.first_response)]
        e2e = e2e_all[rs & ~np.isnan(records.finish) & ~records.failed]
        comp = tpot_component.get(t)
        tp = records.tpot[comp][rs] if comp else np.empty(0)
        tp = tp[~np.isnan(tp)] * 1e3
        target = slo_s.get(t) if slo_s else None
        met = int(np.count_nonzero(lat <= target)) if target is not None else 0
        arrived = int(np.count_nonzero(rs))
        out[t] = TypeMetrics(
            arrived=arrived,
            completed=len(e2e),
            met_slo=met,
            latency_ms=_stats_ms(lat),
            e2e_ms=_stats_ms(e2e),
            tpot_ms={"p50": _pct(tp, 50), "p95": _pct(tp, 95)},
            attainment=met / arrived if target is not None else None,
            goodput=met / span,
        )
    return out
