"""A probe of the **cold start after idle**: what a request pays when the engine and its front end
have been idle for a while before it arrives. A calibration of this host's environment, never of a
policy (docs/results/fidelity.md, "The measurements behind the loop's defaults").

Every other probe point is sent back to back (the next request leaves as soon as the previous one
is answered), so the constant front end and the prefill rows are what a request pays on a path
that was busy a few milliseconds ago. A light load is not like that: at 30% of the capacity one
arrival in eight finds the engine idle, after tens of milliseconds. Measured on this host (a
live experiment recorded in docs/results/fidelity.md), a 64-token prompt then took 12.0 ms of engine
prefill after 300 ms idle against 10.7 ms back to back, and the API server's hop 3.8-4.0 ms in an
idle-heavy replay against ~1.8 ms in the probes: the threads on the path (API server, engine core,
the worker waiting for its next step) have gone to sleep and wake one after another.

**The probe.** Single requests of the workload's typical prompt and one output token, each sent
``gap`` after the previous one was answered, for every gap of :class:`IdlePlan` (the smallest is
back to back); per request its client TTFT and its idle time (send minus the previous answer,
client clock). Around each gap's requests ``/metrics`` is read once (so no read falls inside an
idle gap): the engine's mean prefill and API-server hop per gap, a report.

**The cost** (:class:`ColdStart`): per gap, the median TTFT minus the median of the smallest gap,
at the gaps' median idle times; never below zero, and made non-decreasing in the idle time (an
assumption: a path only cools the longer it idles); linear between the measured idle times, zero
at or below the smallest, held beyond the largest. The simulator adds it to the first token and
finish of a request that reaches an idle engine, by how long the engine had been idle
(:func:`idle_before`); it does not lengthen that iteration for the requests behind it (an
approximation: at a light load, where idle arrivals happen, few are).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from omniplane.fidelity.mixed import stream_body
from omniplane.perf.profiler.client import server_means, server_totals, stream_chat
from omniplane.perf.profiler.run import token_prompt


@dataclass(frozen=True)
class IdlePlan:
    """The idle gaps before a request (ms; the first is back to back) and requests per gap."""

    gaps_ms: tuple[float, ...] = (0.0, 10.0, 30.0, 100.0, 300.0)
    rounds: int = 4


@dataclass(frozen=True)
class IdleSample:
    gap_ms: float  # the gap the probe slept before sending
    idle_ms: float  # send minus the previous answer (client clock): the gap plus the client's own time
    ttft_ms: float  # client TTFT

    def to_json(self) -> dict[str, Any]:
        return {"gap_ms": self.gap_ms, "idle_ms": round(self.idle_ms, 3), "ttft_ms": round(self.ttft_ms, 3)}


@dataclass(frozen=True)
class IdleResult:
    samples: tuple[IdleSample, ...]
    engine_ms: tuple[dict[str, float], ...] = ()  # per gap: the engine's mean prefill and API hop (report)
    error: str | None = None


async def _probe(url: str, model: str, vocab: int, plan: IdlePlan, prompt: int, salt: str) -> IdleResult:
    samples: list[IdleSample] = []
    engine: list[dict[str, float]] = []
    async with httpx.AsyncClient(timeout=60.0) as client:
        for g in plan.gaps_ms:
            before = await server_totals(client, url)
            prev = time.monotonic()
            for j in range(plan.rounds):
                await asyncio.sleep(g / 1e3)
                body = stream_body(model, token_prompt(f"{salt}:idle-{g:g}:{j}", prompt, vocab), 1)
                rec = await stream_chat(client, url, body, 0, api="completions")
                if rec.error or rec.first_token is None:
                    return IdleResult(tuple(samples), tuple(engine),
                                      f"idle probe gap {g:g} ms: {rec.error or 'no first token'}")
                samples.append(IdleSample(g, (rec.start - prev) * 1e3, (rec.first_token - rec.start) * 1e3))
                prev = rec.end
            means = server_means(before, await server_totals(client, url))
            if "prefill" in means:
                row = {"gap_ms": g, "prefill_ms": means["prefill"] * 1e3}
                if "ttft" in means:  # vLLM's TTFT less its queue and prefill: the API server's hop
                    row["api_server_ms"] = (means["ttft"] - means.get("queue", 0.0) - means["prefill"]) * 1e3
                engine.append(row)
    return IdleResult(tuple(samples), tuple(engine))


def run_idle(url: str, model: str, vocab: int, plan: IdlePlan, prompt: int, salt: str) -> IdleResult:
    """Measure ``plan`` (module docstring) against the live engine at ``url``."""
    if not plan.gaps_ms or plan.rounds < 1:
        return IdleResult(())
    try:
        return asyncio.run(_probe(url, model, vocab, plan, max(1, prompt), salt))
    except (httpx.HTTPError, RuntimeError, TimeoutError) as exc:
        return IdleResult((), (), f"idle probe: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class ColdStart:
    """The extra first-response latency after ``idle_s`` of idle (module docstring)."""

    idle_s: tuple[float, ...] = ()  # increasing
    extra_s: tuple[float, ...] = ()  # non-decreasing, the first 0
    samples: int = 0
    notes: tuple[str, ...] = ()

    def cost(self, idle: np.ndarray) -> np.ndarray:
        """Per idle time (s; 0: the engine was busy; inf: it never ran, the largest idle's cost),
        the extra latency (s)."""
        idle = np.asarray(idle, float)
        if len(self.idle_s) < 2:
            return np.zeros(idle.shape)
        return np.asarray(np.interp(idle, self.idle_s, self.extra_s, left=0.0, right=self.extra_s[-1]), float)

    def to_json(self) -> dict[str, Any]:
        return {"idle_ms": [round(x * 1e3, 3) for x in self.idle_s],
                "extra_ms": [round(x * 1e3, 3) for x in self.extra_s], "samples": self.samples,
                "notes": list(self.notes),
                "source": "fitted: the probes' idle points (client TTFT of a typical prompt after each "
                          "idle gap minus that of the back-to-back gap, medians, made non-decreasing)"}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ColdStart:
        return cls(tuple(x / 1e3 for x in d["idle_ms"]), tuple(x / 1e3 for x in d["extra_ms"]),
                   int(d.get("samples", 0)))


def fit_cold(samples: Sequence[IdleSample]) -> ColdStart:
    """:class:`ColdStart` from the samples of one or more probes (module docstring); none (zero
    cost) with a note when fewer than two gaps were measured."""
    by_gap: dict[float, list[IdleSample]] = {}
    for s in samples:
        by_gap.setdefault(s.gap_ms, []).append(s)
    if len(by_gap) < 2:
        note = f"{len(by_gap)} idle gap(s) measured: no cold-start cost"
        return ColdStart(samples=len(samples), notes=(note,))
    pts = sorted((statistics.median(x.idle_ms for x in v), statistics.median(x.ttft_ms for x in v))
                 for v in by_gap.values())
    base = pts[0][1]
    extra = np.maximum.accumulate([max(0.0, t - base) for _, t in pts])
    extra[0] = 0.0
    return ColdStart(tuple(i / 1e3 for i, _ in pts), tuple(float(e) / 1e3 for e in extra), len(samples))


def idle_before(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time in ``t``, how long the engine had been idle just before it: 0 inside a busy
    interval ``(starts[i], ends[i])``, else ``t`` minus the latest end before it (``inf`` with no
    interval starting before ``t``). An interval starting at ``t`` itself is the arrival's own
    step (the simulator starts one at once on an idle engine), so it does not count."""
    t = np.asarray(t, float)
    if len(starts) == 0:
        return np.full(t.shape, np.inf)
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, float)[order], np.maximum.accumulate(np.asarray(ends, float)[order])
    i = np.searchsorted(s, t, side="left") - 1  # the last interval starting before t
    last_end = np.where(i >= 0, e[np.maximum(i, 0)], -np.inf)
    return np.where(t < last_end, 0.0, t - last_end)
