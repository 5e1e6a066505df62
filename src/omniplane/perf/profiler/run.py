"""The profiling sweep: for each request spec and concurrency, closed-loop workers send streamed
requests; metrics come from the steady-state window; the result is a profile table.

Table rows written (see :mod:`omniplane.perf.profiles` for the format):

* ``prefill`` (batch 1, size = prompt tokens), from concurrency 1: the server's own mean prefill
  time when it reports one (vLLM's ``vllm:request_prefill_time_seconds``: first token minus
  first scheduled, engine-core timestamps, i.e. the prefill iteration), else median TTFT minus
  the mean queueing the server reports (``vllm:request_queue_time_seconds``), if it does;
* ``decode`` (batch = concurrency, size = prompt tokens + half the output tokens, the mean
  context over the generation): median TPOT. In a closed loop a newcomer's prefill joins some of
  a request's decode iterations (about concurrency / output tokens of them), so its TPOT is an
  upper bound of a decode iteration; a *burst* spec (``burst=True``: the point sends
  ``concurrency`` requests at once, waits for all, repeats) decodes them as one synchronized
  batch whose decode iterations carry no prefill, and its TPOT is the decode iteration at that
  batch. A burst writes no prefill row (its prompts queue behind each other).

Every request gets its own prompt (distinct first words, or distinct token ids with
``api="completions"``), so a server's prefix cache never answers one request's prefill with
another's. A spec with ``sizes`` cycles through (prompt, output) pairs (a workload's mix); it is
measured (throughput, latencies) but writes no rows.

A dead endpoint fails before anything is sent; an endpoint that starts failing stops the sweep
after the failing point and the result keeps every point measured before it.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

import httpx

from omniplane.perf.profiler.client import server_means, server_totals, stream_chat
from omniplane.perf.profiler.metrics import PointMetrics, RequestRecord, point_metrics
from omniplane.perf.profiles import ProfileRow

Progress = Callable[[int, int, str], None]
# cumulative CPU seconds per part of the host (e.g. omniplane.loadgen.affinity.cpu_split), read
# before and after every point: the point's ``cpu_s`` is the difference
Meter = Callable[[], Mapping[str, float]]


class ProfilerError(RuntimeError):
    """The endpoint cannot be profiled (unreachable, or nothing could be measured)."""


@dataclass(frozen=True)
class RequestSpec:
    """A synthetic request: ``prompt_tokens`` words (or token ids) of prompt, ``max_tokens``
    forced output (``ignore_eos``), output ``modalities`` (e.g. ``("text", "audio")`` for
    vLLM-Omni). ``concurrency`` overrides the run's sweep for this spec; ``sizes`` (a mix of
    (prompt, output) pairs, cycled) overrides the two sizes; ``burst`` sends each round of
    ``concurrency`` requests at once (module docstring); ``duration_s`` makes a closed-loop point's
    workers keep sending until a request of theirs ends that long after every worker has
    completed its first request (the window then lasts at least that long, however slow the
    ramp-up or the machine) instead of
    ``requests_per_worker`` requests each."""

    name: str
    prompt_tokens: int
    max_tokens: int
    modalities: tuple[str, ...] = ("text",)
    extra: Mapping[str, Any] = field(default_factory=dict)
    concurrency: tuple[int, ...] = ()
    sizes: tuple[tuple[int, int], ...] = ()
    burst: bool = False
    duration_s: float = 0.0  # closed loop: the steady state lasts this long (0: a request count)
    rounds: int = 0  # requests per worker (or bursts) for this spec (0: the run's requests_per_worker)

    def size(self, index: int) -> tuple[int, int]:
        return self.sizes[index % len(self.sizes)] if self.sizes else (self.prompt_tokens, self.max_tokens)

    def payload(self, model: str, index: int = 0, api: str = "chat", vocab: int = 0,
                salt: int = 0) -> dict[str, Any]:
        """The body of request number ``index`` of this spec (its own prompt)."""
        prompt, out = self.size(index)
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": out,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }
        if api == "completions":
            body["prompt"] = token_prompt(f"{salt}:{self.name}:{index}", prompt, vocab)
        else:
            words = [f"r{salt}x{index}"] + ["the"] * max(0, prompt - 1)
            body["messages"] = [{"role": "user", "content": " ".join(words)}]
        if self.modalities != ("text",):
            body["modalities"] = list(self.modalities)
        body.update(self.extra)
        return body


def token_prompt(key: str, length: int, vocab: int) -> list[int]:
    """A deterministic token-id prompt of ``length`` ids in ``[3, vocab)`` (0-2: pad, bos, eos),
    different for every ``key``."""
    if vocab <= 3:
        raise ValueError(f"token-id prompts need the model's vocabulary size (> 3), got {vocab}")
    seed = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
    rng = random.Random(seed)
    return [rng.randrange(3, vocab) for _ in range(max(1, length))]


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
    api: str = "chat"  # chat (/v1/chat/completions) or completions (/v1/completions, token ids)
    vocab: int = 0  # completions: the model's vocabulary size, for token-id prompts
    salt: int = 0  # varies every prompt between runs (a prefix cache may keep earlier ones)

    def levels(self, spec: RequestSpec) -> tuple[int, ...]:
        return spec.concurrency or self.concurrency

    def rounds(self, spec: RequestSpec) -> int:
        return spec.rounds or self.requests_per_worker


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
    records: list[RequestRecord] = []
    salt = run.salt * 100_003 + conc

    async def one(w: int, k: int) -> RequestRecord:
        index = k * conc + w  # so a mix's sizes are spread over the workers
        payload = spec.payload(run.model, index, run.api, run.vocab, salt=salt)
        rec = await stream_chat(client, run.url, payload, w, run.sample_rate, run.api)
        records.append(rec)
        tick()
        return rec

    first_done: set[int] = set()
    opened: list[float] = []

    async def worker(w: int) -> None:
        if spec.duration_s > 0:
            # timed by the records' own end stamps (no await between a stamp and these checks):
            # the window opens at the last worker's first end and each worker's last request
            # ends at least ``duration_s`` after it, so the window lasts at least that long
            k, last_end = 0, 0.0
            while not opened or last_end < opened[0] + spec.duration_s:
                rec = await one(w, k)
                if not rec.ok:
                    return
                k, last_end = k + 1, rec.end
                first_done.add(w)
                if len(first_done) == conc and not opened:
                    opened.append(rec.end)
            return
        for k in range(run.rounds(spec)):
            if not (await one(w, k)).ok:
                return

    if spec.burst:
        for k in range(run.rounds(spec)):
            burst = await asyncio.gather(*(one(w, k) for w in range(conc)))
            if not all(r.ok for r in burst):
                break
    else:
        await asyncio.gather(*(worker(w) for w in range(conc)))
    return records


def _rows(run: ProfileRun, spec: RequestSpec, m: PointMetrics, stamp: str) -> list[ProfileRow]:
    src = (f"measured: omniplane profile {run.url} {stamp} request={spec.name} "
           f"c={m.concurrency} n={m.n_window}")
    prompt = m.prompt_tokens if m.prompt_tokens is not None else float(spec.prompt_tokens)
    rows: list[ProfileRow] = []
    if spec.sizes:
        return rows  # a mix: no single size to file the times under
    ttft, step = m.median("ttft"), m.median("tpot")
    if m.concurrency == 1 and ttft is not None and not spec.burst:
        latency = m.server_s.get("prefill", ttft - (m.queue_time_s or 0.0))
        if latency > 0:
            rows.append(ProfileRow(run.component, run.gpu, run.tp, "prefill", 1, prompt, latency * 1e3, src))
    if step is not None and step > 0 and m.output_tokens > 1:
        context = prompt + m.output_tokens / 2
        rows.append(ProfileRow(run.component, run.gpu, run.tp, "decode", m.concurrency, context,
                               step * 1e3, src))
    return rows


async def _run(run: ProfileRun, progress: Progress | None, meter: Meter | None = None) -> SweepResult:
    total = sum(sum(run.levels(s)) * run.rounds(s) for s in run.requests)  # timed points: a guess
    done = 0
    label = ""

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total, label)

    async with httpx.AsyncClient(timeout=10.0) as probe:
        try:
            await probe.get(f"{run.url}/v1/models")
        except httpx.HTTPError as exc:
            raise ProfilerError(f"cannot reach {run.url}: {type(exc).__name__}: {exc}") from None
    result = SweepResult([], [])
    stamp = date.today().isoformat()
    seen: set[tuple[str, int, float]] = set()
    for spec in run.requests:
        for conc in run.levels(spec):
            label = f"{spec.name} c={conc}"
            # a fresh pool per point: no keep-alive connection sits idle across points (a server
            # closes those after its keep-alive timeout, and reusing one fails the request)
            limits = httpx.Limits(max_connections=conc + 2)
            async with httpx.AsyncClient(timeout=run.timeout_s, limits=limits) as client:
                before = await server_totals(client, run.url)
                cpu0, t0 = (meter() if meter else {}), time.monotonic()
                records = await _point(client, run, spec, conc, tick)
                cpu1, wall = (meter() if meter else {}), time.monotonic() - t0
                after = await server_totals(client, run.url)
            server = server_means(before, after)
            result.queue_reported = result.queue_reported or "queue" in server
            m = point_metrics(spec.name, conc, records, server, burst=spec.burst)
            m = replace(m, cpu_s={k: v - cpu0.get(k, 0.0) for k, v in cpu1.items()}, wall_s=wall,
                        prompt_total=sum(spec.size(i)[0] if r.prompt_tokens is None else r.prompt_tokens
                                         for i, r in enumerate(records)),
                        output_total=sum(r.output_tokens for r in records))
            result.points.append(m)
            errors = [r.error for r in records if r.error]
            if errors:
                result.error = (f"{label}: {len(errors)} of {len(records)} requests failed "
                                f"(first: {errors[0]}); stopped, earlier points kept")
                return result
            if m.n_window == 0 and m.request_throughput == 0:
                result.error = (f"{label}: no request fell inside the steady-state window; "
                                "raise --requests-per-worker")
                continue
            for row in _rows(run, spec, m, stamp):
                key = (row.op, row.batch, row.size)
                if key not in seen:
                    seen.add(key)
                    result.rows.append(row)
    return result


def run_profile(run: ProfileRun, progress: Progress | None = None, meter: Meter | None = None) -> SweepResult:
    """Profile ``run.url``; raises :class:`ProfilerError` when the endpoint is unreachable. With a
    ``meter``, every point also records the CPU seconds each part of the host used while it ran."""
    if not run.requests or not all(run.levels(s) for s in run.requests):
        raise ProfilerError("nothing to profile: give at least one request spec and one concurrency")
    if run.api not in ("chat", "completions"):
        raise ProfilerError(f"api must be 'chat' or 'completions', got {run.api!r}")
    if run.api == "completions" and run.vocab <= 3:
        raise ProfilerError("token-id prompts (api 'completions') need the model's vocabulary size (--vocab)")
    return asyncio.run(_run(run, progress, meter))
