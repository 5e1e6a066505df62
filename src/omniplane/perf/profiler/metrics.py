"""Per-request records and the metrics of one sweep point, in the steady-state window only.

Metric names follow ``vllm bench serve --omni``: TTFT (time to first token), TPOT (time per
output token after the first), ITL (gaps between streamed chunks), E2EL (end-to-end latency),
TTFP (time to the first audio packet) and RTF (audio real-time factor: generation time over
audio duration).

Steady state: with ``c`` closed-loop workers, the window opens when every worker has completed
its first request (ramp-up: the server's batch is filling) and closes when the first worker
finishes its last request (drain: fewer than ``c`` requests in flight). Only requests that start
and end inside the window count. A burst point (``c`` requests sent at once, repeated) counts
every request: its decode phase is a batch of exactly ``c``, its TTFT includes the burst's own
prefills.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RequestRecord:
    """One request as the client saw it; times in seconds on the client's monotonic clock."""

    worker: int
    start: float
    end: float
    first_token: float | None = None  # first text chunk
    first_audio: float | None = None  # first audio chunk
    chunk_times: tuple[float, ...] = ()  # arrival of every chunk carrying output
    output_tokens: int = 0
    prompt_tokens: int | None = None  # as the server reported it (usage)
    audio_seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.start

    @property
    def ttfp(self) -> float | None:
        return None if self.first_audio is None else self.first_audio - self.start

    @property
    def e2el(self) -> float:
        return self.end - self.start

    @property
    def tpot(self) -> float | None:
        if self.first_token is None or self.output_tokens < 2:
            return None
        return (self.end - self.first_token) / (self.output_tokens - 1)

    @property
    def itls(self) -> list[float]:
        t = self.chunk_times
        return [b - a for a, b in itertools.pairwise(t)]


def steady_window(records: Sequence[RequestRecord]) -> tuple[float, float]:
    """(open, close) of the steady-state window (module docstring)."""
    by_worker: dict[int, list[RequestRecord]] = {}
    for r in records:
        by_worker.setdefault(r.worker, []).append(r)
    first_done = max(min(r.end for r in rs) for rs in by_worker.values())
    last_done = min(max(r.end for r in rs) for rs in by_worker.values())
    return first_done, last_done


def _stats(xs: Sequence[float]) -> dict[str, float]:
    if not xs:
        return {}
    s = sorted(xs)
    return {"mean": statistics.fmean(s), "median": statistics.median(s),
            "p99": s[min(len(s) - 1, int(0.99 * len(s)))]}


@dataclass(frozen=True)
class PointMetrics:
    """Metrics of one (request spec, concurrency) point over its steady-state window."""

    request: str
    concurrency: int
    window_s: float
    n_window: int
    n_total: int
    n_errors: int
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # name -> mean/median/p99 (s)
    request_throughput: float = 0.0  # requests completed in the window per second of it
    output_throughput: float = 0.0  # output tokens of the window's requests per second of it
    # means over the point of the server's own per-request timings, when it reports them
    # (vLLM: queue, prefill, decode, ttft, itl, e2el; omniplane.perf.profiler.client)
    server_s: dict[str, float] = field(default_factory=dict)
    prompt_tokens: float | None = None  # median prompt tokens (server's count when reported)
    output_tokens: float = 0.0  # median output tokens
    chunk_per_token: bool = False  # every output chunk carried one token (ITL = one iteration)
    # CPU seconds each part of the host used while the point ran (``run_profile``'s ``meter``,
    # e.g. omniplane.loadgen.affinity.cpu_split), the point's wall time, and what it moved: every
    # request of the point (window or not), its prompt tokens and its streamed output tokens
    cpu_s: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    prompt_total: int = 0
    output_total: int = 0

    def median(self, name: str) -> float | None:
        return self.metrics.get(name, {}).get("median")

    @property
    def queue_time_s(self) -> float | None:
        """Mean queueing the server reported, if it did."""
        return self.server_s.get("queue")

    @property
    def frontend_s(self) -> float | None:
        """Client TTFT (median) minus the server's queueing and prefill (means): what the HTTP
        hop and the server's front end add to a request's first token, when the server reports
        both (meaningful at concurrency 1, where nothing else runs)."""
        ttft, queue, prefill = self.median("ttft"), self.server_s.get("queue"), self.server_s.get("prefill")
        if ttft is None or queue is None or prefill is None:
            return None
        return ttft - queue - prefill

    def to_json(self) -> dict[str, object]:
        return {"request": self.request, "concurrency": self.concurrency, "window_s": self.window_s,
                "n_window": self.n_window, "n_total": self.n_total, "n_errors": self.n_errors,
                "metrics_ms": {k: {s: round(v * 1e3, 4) for s, v in d.items()}
                               for k, d in self.metrics.items()},
                "request_throughput": self.request_throughput, "output_throughput": self.output_throughput,
                "queue_time_ms": None if self.queue_time_s is None else round(self.queue_time_s * 1e3, 4),
                "server_ms": {k: round(v * 1e3, 4) for k, v in self.server_s.items()},
                "frontend_ms": None if self.frontend_s is None else round(self.frontend_s * 1e3, 4),
                "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "chunk_per_token": self.chunk_per_token,
                "cpu_s": {k: round(v, 4) for k, v in self.cpu_s.items()}, "wall_s": round(self.wall_s, 4),
                "prompt_total": self.prompt_total, "output_total": self.output_total}


def point_metrics(request: str, concurrency: int, records: Sequence[RequestRecord],
                  server_s: dict[str, float] | None = None, burst: bool = False) -> PointMetrics:
    ok = [r for r in records if r.ok]
    errors = len(records) - len(ok)
    server = dict(server_s or {})
    if not ok:
        return PointMetrics(request, concurrency, 0.0, 0, len(records), errors, server_s=server)
    lo, hi = (min(r.start for r in ok), max(r.end for r in ok)) if burst else steady_window(ok)
    win = [r for r in ok if r.start >= lo and r.end <= hi]
    span = hi - lo
    metrics: dict[str, dict[str, float]] = {}
    for name, xs in (
        ("ttft", [x for r in win if (x := r.ttft) is not None]),
        ("tpot", [x for r in win if (x := r.tpot) is not None]),
        ("itl", [x for r in win for x in r.itls]),
        ("e2el", [r.e2el for r in win]),
        ("ttfp", [x for r in win if (x := r.ttfp) is not None]),
        ("rtf", [r.e2el / r.audio_seconds for r in win if r.audio_seconds > 0]),
    ):
        if xs:
            metrics[name] = _stats(xs)
    prompts = [float(r.prompt_tokens) for r in win if r.prompt_tokens is not None]
    return PointMetrics(
        request, concurrency, span, len(win), len(records), errors, metrics,
        sum(1 for r in ok if lo <= r.end <= hi) / span if span > 0 else 0.0,
        sum(r.output_tokens for r in win) / span if span > 0 else 0.0,
        server,
        statistics.median(prompts) if prompts else None,
        statistics.median([float(r.output_tokens) for r in win]) if win else 0.0,
        bool(win) and all(len(r.chunk_times) == r.output_tokens for r in win),
    )
