"""A probe of **mixed** iterations: one prefill chunk of ``k`` tokens batched with ``n`` decodes.

The probes' bursts (:mod:`omniplane.fidelity.calibrate`) measure decode-only iterations and the
concurrency-1 prefills prefill-only ones; a served load runs mostly iterations that hold both (a
newcomer's prompt joins the running decodes: vLLM v1 schedules the running requests first, then
waiting prompts into the rest of the token budget). This probe measures those directly, on the
live engine, with the engine's own stamps:

1. ``n`` streamed requests are sent at once (a burst, prompts cut so that all of them prefill in
   one iteration) with enough output tokens to keep decoding for the whole point;
2. once every one of them has its first token (all ``n`` decode every iteration from then on),
   single requests of a ``k``-token prompt and **one** output token are sent one after another;
   ``k + n`` fits the token budget, so each is scheduled whole into one iteration with the ``n``
   decodes;
3. around each, ``/metrics`` is read: the increase of ``vllm:request_prefill_time_seconds`` (the
   request's first token minus its first scheduling, engine-core stamps) is that one mixed
   iteration's time, kept only when exactly one request finished in between and every decode of
   the burst was still running after it (else the sample is dropped, and counted).

The decode context of a sample is the burst's prompt plus the tokens its streams had received
when the sample's request was sent (their mean). Nothing here reads a replay.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from omniplane.perf.profiler.client import PATHS, server_totals, stream_chat
from omniplane.perf.profiler.run import token_prompt
from omniplane.perf.steptime import MixedRow


@dataclass(frozen=True)
class MixedPlan:
    """What a mixed probe measures: every (decodes, chunk) pair, decodes cut to the engine's
    ``max_num_seqs - 1`` (so the sample's request is admitted at once) and ``chunk + decodes``
    within its token budget (so the chunk is scheduled whole)."""

    # 1 and 2: a light load's iterations (at 30% of capacity a newcomer meets 1-3 decodes; the
    # step model extrapolated below 4 priced them ~0.5 ms low, docs/results/fidelity.md);
    # 128 (cut to max_num_seqs - 1): the capacity loop's iterations, a newcomer with 127 decodes
    decodes: tuple[int, ...] = (1, 2, 4, 16, 64, 128)
    chunks: tuple[int, ...] = (16, 64, 256)
    rounds: int = 2  # samples per (decodes, chunk)
    prompt: int = 16  # the burst's prompt (cut to budget // decodes)
    # the burst's output: 32 + tokens_per_sample(n) per sample, to outlast the samples (each
    # takes an HTTP round trip, one or two iterations and two /metrics reads, so fewer tokens at
    # larger, slower batches): a heuristic sized for this host; a sample taken after the burst
    # ended is dropped and counted, never kept
    tokens_per_sample: int = 12

    def pairs(self, max_num_seqs: int, budget: int) -> list[tuple[int, int]]:
        ns = sorted({min(n, max_num_seqs - 1) for n in self.decodes if max_num_seqs > 1})
        return [(n, k) for n in ns for k in self.chunks if n + k <= budget]

    def burst_tokens(self, decodes: int, samples: int) -> int:
        per = max(4, round(self.tokens_per_sample * 16 / max(decodes, 16)))
        return 32 + per * samples


@dataclass(frozen=True)
class MixedResult:
    samples: tuple[MixedRow, ...]
    dropped: int  # samples whose window saw another request finish, or a decode end
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"samples": [s.to_json() for s in self.samples], "dropped": self.dropped, "error": self.error}


async def _decoding(client: httpx.AsyncClient, url: str, body: dict[str, Any], counts: list[int], i: int,
                    started: asyncio.Event, n: int) -> None:
    """One burst stream: counts its tokens in ``counts[i]``; sets ``started`` when all ``n``
    streams have a token."""
    async with client.stream("POST", f"{url}{PATHS['completions']}", json=body) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"mixed probe: HTTP {resp.status_code} for a decode stream")
        async for line in resp.aiter_lines():
            data = line[5:].strip() if line.startswith("data:") else "[DONE]"
            if data != "[DONE]" and json.loads(data).get("choices"):  # one chunk per token
                counts[i] += 1
                if counts[i] == 1 and sum(c > 0 for c in counts) == n:
                    started.set()


def stream_body(model: str, prompt: list[int], tokens: int) -> dict[str, Any]:
    """A streamed completions request of token ids, ``tokens`` forced output tokens."""
    return {"model": model, "prompt": prompt, "max_tokens": tokens, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}}


async def _point(url: str, model: str, vocab: int, n: int, chunk_sizes: Sequence[int], plan: MixedPlan,
                 prompt: int, salt: str, label: str) -> tuple[list[MixedRow], int]:
    rounds = plan.rounds
    out_tokens = plan.burst_tokens(n, len(chunk_sizes) * rounds)
    counts = [0] * n
    started = asyncio.Event()
    samples: list[MixedRow] = []
    dropped = 0
    limits = httpx.Limits(max_connections=n + 4)
    async with httpx.AsyncClient(timeout=300.0, limits=limits) as client:
        streams = [asyncio.create_task(_decoding(
            client, url, stream_body(model, token_prompt(f"{salt}:mixed-d{n}:{i}", prompt, vocab),
                                     out_tokens), counts, i, started, n)) for i in range(n)]
        try:
            await asyncio.wait_for(started.wait(), timeout=120.0)
            j = 0
            for _ in range(rounds):
                for k in chunk_sizes:
                    before = await server_totals(client, url)
                    context = prompt + statistics.fmean(counts)
                    body = stream_body(model, token_prompt(f"{salt}:mixed-d{n}-k{k}:{j}", k, vocab), 1)
                    rec = await stream_chat(client, url, body, 0, api="completions")
                    after = await server_totals(client, url)
                    j += 1
                    if rec.error:
                        raise RuntimeError(f"mixed probe {label} n={n} k={k}: {rec.error}")
                    running = not any(s.done() for s in streams)
                    b, a = (before or {}).get("prefill"), (after or {}).get("prefill")
                    if b is None or a is None:
                        raise RuntimeError("mixed probe: the engine reports no "
                                           "vllm:request_prefill_time_seconds")
                    if running and a[1] - b[1] == 1:
                        samples.append(MixedRow(n, k, context, (a[0] - b[0]) * 1e3,
                                                   f"measured: {label} mixed n={n} k={k}"))
                    else:
                        dropped += 1
            await asyncio.gather(*streams)
        finally:
            for s in streams:
                s.cancel()
    return samples, dropped


def run_mixed(url: str, model: str, vocab: int, plan: MixedPlan, max_num_seqs: int, budget: int,
              salt: str, label: str = "mixed probe") -> MixedResult:
    """Measure every pair of ``plan`` (module docstring) against the live engine at ``url``."""
    by_n: dict[int, list[int]] = {}
    for n, k in plan.pairs(max_num_seqs, budget):
        by_n.setdefault(n, []).append(k)
    samples: list[MixedRow] = []
    dropped = 0
    t0 = time.monotonic()
    try:
        for n, ks in by_n.items():
            got, lost = asyncio.run(_point(url, model, vocab, n, ks, plan,
                                           max(1, min(plan.prompt, budget // n)), salt, label))
            samples += got
            dropped += lost
    except (RuntimeError, httpx.HTTPError, TimeoutError) as exc:
        spent = time.monotonic() - t0
        return MixedResult(tuple(samples), dropped, f"{type(exc).__name__}: {exc} after {spent:.1f} s")
    return MixedResult(tuple(samples), dropped)
