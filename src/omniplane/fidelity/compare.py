"""Predicted against measured: the metrics both sides report, computed the same way, and the
error of each.

Per request: TTFT (first token minus send time), TPOT ((finish - first token) / (output tokens
- 1), requests with at least two output tokens), E2E (finish minus send time). Per load:
``throughput_rps`` = completed requests / (last finish - first send), p50 and p95 of TTFT and
TPOT, p50 of E2E (milliseconds). Percentiles interpolate linearly (numpy's default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from omniplane.loadgen.metrics import COMPLETED, Record

METRICS = ("throughput_rps", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "e2e_p50_ms")


@dataclass(frozen=True, slots=True)
class Timing:
    """One completed request on either side (seconds on one clock)."""

    start: float
    first: float
    end: float
    output_tokens: int


def measured_timings(records: Iterable[Record]) -> list[Timing]:
    """The completed requests of a load generator run (first token: the first text chunk)."""
    return [Timing(r.start, r.text_first, r.end, r.output_tokens) for r in records
            if r.status == COMPLETED and r.text_first is not None and r.end is not None]


def summarize(timings: Sequence[Timing]) -> dict[str, float | None]:
    """The :data:`METRICS` of a run (``None`` where nothing completed)."""
    if not timings:
        return dict.fromkeys(METRICS)
    span = max(t.end for t in timings) - min(t.start for t in timings)
    ttft = [t.first - t.start for t in timings]
    tpot = [(t.end - t.first) / (t.output_tokens - 1) for t in timings if t.output_tokens > 1]
    e2e = [t.end - t.start for t in timings]

    def pct(xs: list[float], q: float) -> float | None:
        return float(np.percentile(xs, q)) * 1e3 if xs else None

    return {
        "throughput_rps": len(timings) / span if span > 0 else None,
        "ttft_p50_ms": pct(ttft, 50),
        "ttft_p95_ms": pct(ttft, 95),
        "tpot_p50_ms": pct(tpot, 50),
        "tpot_p95_ms": pct(tpot, 95),
        "e2e_p50_ms": pct(e2e, 50),
    }


def errors(measured: Mapping[str, float | None],
           simulated: Mapping[str, float | None]) -> dict[str, float | None]:
    """Signed relative error of each metric, (simulated - measured) / measured."""
    out: dict[str, float | None] = {}
    for k in METRICS:
        m, s = measured.get(k), simulated.get(k)
        out[k] = (s - m) / m if m is not None and s is not None and m != 0 else None
    return out


# Targets of issue 16's "Must show": |error| of these metrics at every load.
TARGETS = {"throughput_rps": 0.10, "ttft_p50_ms": 0.15, "tpot_p50_ms": 0.15}


def within_targets(loads: Iterable[Mapping[str, Mapping[str, float | None]]]) -> dict[str, bool]:
    """Per targeted metric: is |error| within its target at every load?"""
    out = dict.fromkeys(TARGETS, True)
    for load in loads:
        err = errors(load["measured"], load["simulated"])
        for k, limit in TARGETS.items():
            e = err[k]
            out[k] = out[k] and e is not None and abs(e) <= limit
    return out


def mean_ttft_ms(timings: Sequence[Timing]) -> float | None:
    return float(np.mean([t.first - t.start for t in timings])) * 1e3 if timings else None


def ttft_decomposition(client_ttft_ms: float | None, server_ms: Mapping[str, float],
                       sim_ttft_ms: float | None, frontend_ms: float) -> dict[str, dict[str, float | None]]:
    """Where the mean TTFT goes, on both sides (ms; means over the replay's requests, from
    vLLM's own histograms on the measured side: no per-request stamps leave the engine).

    Measured: ``client`` (client TTFT - vLLM's TTFT, which starts when the API server has the
    request: HTTP, SSE delivery and the client's own stalls), ``api_server`` (vLLM's TTFT -
    queue - prefill: the API server to engine-core hop and back, output processing), ``queue``
    (arrival in the engine core to first scheduled), ``prefill`` (first scheduled to first
    token, every iteration in between, decodes of other requests included). Simulated: the
    constant ``front_end`` (fitted to the probes) and ``engine`` (arrival to first token in the
    simulator: its queue and prefill iterations)."""
    def get(k: str) -> float | None:
        return server_ms.get(k)

    vt, q, p = get("ttft"), get("queue"), get("prefill")
    measured = {"total": client_ttft_ms,
                "client": client_ttft_ms - vt if client_ttft_ms is not None and vt is not None else None,
                "api_server": vt - q - p if vt is not None and q is not None and p is not None else None,
                "queue": q, "prefill": p,
                "engine": q + p if q is not None and p is not None else None}
    simulated = {"total": sim_ttft_ms, "front_end": frontend_ms,
                 "engine": sim_ttft_ms - frontend_ms if sim_ttft_ms is not None else None}
    return {"measured": measured, "simulated": simulated}
