"""The profiling sweep: for each request spec and concurrency, closed-loop workers send streamed
requests; metrics come from the steady-state window; the result is a profile table.

Table rows written (see :mod:`omniplane.perf.profiles` for the format):

* ``prefill`` (batch 1, size = prompt tokens): median TTFT at concurrency 1 minus the mean
  queueing time the server reports (vLLM's ``vllm:request_queue_time_seconds``), if it does;
* ``decode`` (batch = concurrency, size = prompt tokens + half the output tokens, the mean
  context over the generation): median TPOT.

A dead endpoint fails before anything is sent; an endpoint that starts failing stops the sweep
after the failing point and the result keeps every point measured before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import httpx

from omniplane.perf.profiler.client import queue_time_totals, stream_chat
from omniplane.perf.profiler.metrics import PointMetrics, RequestRecord, point_metrics
from omniplane.perf.profiles import ProfileRow

Progress = Callable[[int, int, str], None]


class ProfilerError(RuntimeError):
    """The endpoint cannot be profiled (unreachable, or nothing could be measured)."""


@dataclass(frozen=True)
class RequestSpec:
    """A synthetic request: ``prompt_tokens`` words of prompt, ``max_tokens`` forced output
    (``ignore_eos``), output ``modalities`` (e.g. ``("text", "audio")`` for vLLM-Omni)."""

    name: str
    prompt_tokens: int
    max_tokens: int
    modalities: tuple[str, ...] = ("text",)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def payload(self, model: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": " ".join(["the"] * max(1, self.prompt_tokens))}],
            "max_tokens": self.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }
        if self.modalities != ("text",):
            body["modalities"] = list(self.modalities)
        body.update(self.extra)
        return body


@dataclass(frozen=True)
class ProfileRun:
    url: str
    model: str  # the served model name
    component: str  # the component the table describes
    gpu: str
    tp: int
    requests: tuple[RequestSpec, ...]
    concurrency: tuple[int, ...] = (1, 2, 4, 8)
    requests_per_worker: int = 4
    timeout_s: float = 600.0
    sample_rate: int = 24000


@dataclass
class SweepResult:
    points: list[PointMetrics]
    rows: list[ProfileRow]
    error: str | None = None
    queue_reported: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"points": [p.to_json() for p in self.points], "error": self.error,
                "queue_reported": self.queue_reported,
                "rows": [r.__dict__ for r in self.rows]}


async def _point(client: httpx.AsyncClient, run: ProfileRun, spec: RequestSpec, conc: int,
                 tick: Callable[[], None]) -> list[RequestRecord]:
    payload = spec.payload(run.model)
    records: list[RequestRecord] = []

    async def worker(w: int) -> None:
        for _ in range(run.requests_per_worker):
            rec = await stream_chat(client, run.url, payload, w, run.sample_rate)
            records.append(rec)
            tick()
            if not rec.ok:
                return

    await asyncio.gather(*(worker(w) for w in range(conc)))
    return records


def _rows(run: ProfileRun, spec: RequestSpec, m: PointMetrics, stamp: str) -> list[ProfileRow]:
    src = (f"measured: omniplane profile {run.url} {stamp} request={spec.name} "
           f"c={m.concurrency} n={m.n_window}")
    prompt = m.prompt_tokens if m.prompt_tokens is not None else float(spec.prompt_tokens)
    rows = []
    ttft, tpot = m.median("ttft"), m.median("tpot")
    if m.concurrency == 1 and ttft is not None:
        latency = ttft - (m.queue_time_s or 0.0)
        if latency > 0:
            rows.append(ProfileRow(run.component, run.gpu, run.tp, "prefill", 1, prompt, latency * 1e3, src))
    if tpot is not None and tpot > 0:
        context = prompt + m.output_tokens / 2
        rows.append(ProfileRow(run.component, run.gpu, run.tp, "decode", m.concurrency, context,
                               tpot * 1e3, src))
    return rows


async def _run(run: ProfileRun, progress: Progress | None) -> SweepResult:
    total = len(run.requests) * sum(run.concurrency) * run.requests_per_worker
    done = 0
    label = ""

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total, label)

    limits = httpx.Limits(max_connections=max(run.concurrency) + 2)
    async with httpx.AsyncClient(timeout=run.timeout_s, limits=limits) as client:
        try:
            await client.get(f"{run.url}/v1/models", timeout=10.0)
        except httpx.HTTPError as exc:
            raise ProfilerError(f"cannot reach {run.url}: {type(exc).__name__}: {exc}") from None
        result = SweepResult([], [])
        stamp = date.today().isoformat()
        seen: set[tuple[str, int, float]] = set()
        for spec in run.requests:
            for conc in run.concurrency:
                label = f"{spec.name} c={conc}"
                before = await queue_time_totals(client, run.url)
                records = await _point(client, run, spec, conc, tick)
                after = await queue_time_totals(client, run.url)
                queue = None
                if before is not None and after is not None and after[1] > before[1]:
                    queue = (after[0] - before[0]) / (after[1] - before[1])
                    result.queue_reported = True
                m = point_metrics(spec.name, conc, records, queue)
                result.points.append(m)
                errors = [r.error for r in records if r.error]
                if errors:
                    result.error = (f"{label}: {len(errors)} of {len(records)} requests failed "
                                    f"(first: {errors[0]}); stopped, earlier points kept")
                    return result
                if m.n_window == 0:
                    result.error = (f"{label}: no request fell inside the steady-state window; "
                                    "raise --requests-per-worker")
                    continue
                for row in _rows(run, spec, m, stamp):
                    key = (row.op, row.batch, row.size)
                    if key not in seen:
                        seen.add(key)
                        result.rows.append(row)
        return result


def run_profile(run: ProfileRun, progress: Progress | None = None) -> SweepResult:
    """Profile ``run.url``; raises :class:`ProfilerError` when the endpoint is unreachable."""
    if not run.requests or not run.concurrency:
        raise ProfilerError("nothing to profile: give at least one request spec and one concurrency")
    return asyncio.run(_run(run, progress))
