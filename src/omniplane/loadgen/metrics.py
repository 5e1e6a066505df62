"""What a load run measured, per request and summarised with ``vllm bench serve`` metric names.

Times are model seconds from the start of the run (wall seconds divided by the deployment's
time scale; 1 for a real deployment). Names follow ``vllm bench serve`` (and its ``--omni``
variant): ``ttft`` time to first token, ``ttfp`` time to the first audio packet, ``tpot`` time
per output token after the first, ``e2el`` end-to-end latency; each as ``mean_/median_/std_/
p50_/p90_/p95_/p99_<metric>_ms``; ``request_throughput``, ``request_goodput``. omniplane adds
the first-response metric of each type (TTFT for text, TTFP/TTFO for speech, E2EL for images)
as ``first_response`` and the SLO attainment.

Goodput counts requests whose first response met their type's SLO, over the span of arrival
times (as the simulator does, so the two compare), not over the run's wall duration.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PERCENTILES = (50, 90, 95, 99)
COMPLETED, FAILED, SHED, LOST, UNFINISHED = "completed", "failed", "shed", "lost", "unfinished"


@dataclass(frozen=True)
class Record:
    """One request as the client saw it. ``status``: completed; failed (an error the client
    saw: HTTP 4xx/5xx other than shedding, or an error in the stream); shed (HTTP 503 with
    Retry-After: the server refused it under overload); lost (no answer and no error: the
    connection broke or the stream ended early); unfinished (still unanswered, or not yet sent,
    when the run's deadline passed: the run was cut short, the server dropped nothing)."""

    id: int
    type: str
    arrival: float  # scheduled send time
    start: float  # actual send time
    status: str
    end: float | None = None
    text_first: float | None = None  # first text chunk
    audio_first: float | None = None  # first audio chunk
    first_response: float | None = None  # the type's first response (server-tagged chunk)
    server_first_response: float | None = None  # the same, as the server timed it from its arrival
    output_tokens: int = 0
    http_status: int | None = None
    retry_after_s: float | None = None
    error: str = ""

    def latency(self) -> float | None:
        return None if self.first_response is None else self.first_response - self.start


def _stats(name: str, xs: Sequence[float]) -> dict[str, float | None]:
    ms = sorted(x * 1e3 for x in xs)
    out: dict[str, float | None] = {
        f"mean_{name}_ms": statistics.fmean(ms) if ms else None,
        f"median_{name}_ms": statistics.median(ms) if ms else None,
        f"std_{name}_ms": statistics.pstdev(ms) if ms else None,
    }
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = _percentile(ms, p) if ms else None
    return out


def _percentile(sorted_ms: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    k = (len(sorted_ms) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (k - lo)


def _group(records: Sequence[Record], slo_s: float | None, span: float, by_type: bool) -> dict[str, Any]:
    done = [r for r in records if r.status == COMPLETED]
    lat = [x for r in done if (x := r.latency()) is not None]
    met = sum(1 for x in lat if x <= slo_s) if slo_s is not None else None
    ttft = [r.text_first - r.start for r in done if r.text_first is not None]
    ttfp = [r.audio_first - r.start for r in done if r.audio_first is not None]
    e2el = [r.end - r.start for r in done if r.end is not None]
    tpot = [
        (r.end - r.text_first) / (r.output_tokens - 1)
        for r in done
        if r.end is not None and r.text_first is not None and r.output_tokens > 1 and r.audio_first is None
    ]
    out: dict[str, Any] = {
        "sent": len(records),
        "completed": len(done),
        "failed": sum(r.status == FAILED for r in records),
        "shed": sum(r.status == SHED for r in records),
        "lost": sum(r.status == LOST for r in records),
        "unfinished": sum(r.status == UNFINISHED for r in records),
        "request_throughput": len(done) / span if span > 0 else None,
    }
    if by_type:
        out["slo_ms"] = slo_s * 1e3 if slo_s is not None else None
        out["met_slo"] = met
        out["attainment"] = met / len(records) if met is not None and records else None
        out["request_goodput"] = met / span if met is not None and span > 0 else None
    for name, xs in (("first_response", lat), ("ttft", ttft), ("ttfp", ttfp), ("tpot", tpot), ("e2el", e2el)):
        out.update(_stats(name, xs))
    return out


def summarize(records: Sequence[Record], slo_s: Mapping[str, float] | None) -> dict[str, Any]:
    """Totals and ``per_type`` metrics (module docstring)."""
    arrivals = [r.arrival for r in records]
    span = max(arrivals) - min(arrivals) if len(arrivals) > 1 else 0.0
    slo = dict(slo_s or {})
    types = sorted({r.type for r in records})
    per_type = {t: _group([r for r in records if r.type == t], slo.get(t), span, True) for t in types}
    total = _group(records, None, span, False)
    goodputs = [m["request_goodput"] for m in per_type.values()]
    total["request_goodput"] = sum(goodputs) if goodputs and all(g is not None for g in goodputs) else None
    met = [m["met_slo"] for m in per_type.values()]
    total["attainment"] = (sum(met) / len(records)) if records and all(x is not None for x in met) else None
    ends = [r.end for r in records if r.end is not None]
    total["duration"] = (max(ends) - min(r.start for r in records)) if ends else None
    total["arrival_span"] = span
    total["per_type"] = per_type
    return total


LATE_S = 0.05  # assumption: a send this much after its arrival time means the client was stalled


def send_lateness(records: Sequence[Record], late_s: float = LATE_S) -> dict[str, float | int]:
    """How late the load generator sent the requests it sent (actual - scheduled send time, ms):
    p50, p99, max, and how many were later than ``late_s``. A client stalled by its host sends
    late, and what it then measures is partly the host, not the engine."""
    unsent = (LOST, UNFINISHED)
    late = sorted(r.start - r.arrival for r in records if r.status not in unsent or r.start != r.arrival)
    if not late:
        return {}
    return {"p50": 1e3 * late[len(late) // 2], "p99": 1e3 * late[int(0.99 * (len(late) - 1))],
            "max": 1e3 * late[-1], "over_ms": 1e3 * late_s, "over": sum(x > late_s for x in late),
            "sent": len(late)}
