"""The fidelity loop's environment calibration, from its probes only
(docs/guides/check-your-engine.md, "What is fitted to what").

A **probe** is a short profile of the live engine (:class:`ProbePlan`): prefill points at
concurrency 1 and decode bursts at a few batch sizes and two contexts. The loop takes one
before and one after every replay, so the step model a load is predicted with was measured
on the same host, minutes apart, as the replay itself (a shared machine's load drifts; a
profile taken once at the start measured another machine). Nothing here ever reads a replay.

From a probe's points (:class:`~omniplane.perf.profiler.PointMetrics`):

* **step-model rows** (:func:`probe_rows`), the **engine's own** times, so the HTTP side is not
  in them: a prefill row is vLLM's mean prefill time (``vllm:request_prefill_time_seconds``:
  first token minus first scheduled, engine-core stamps); a decode row is vLLM's mean
  inter-token latency over the burst (``vllm:inter_token_latency_seconds``, engine-core stamps
  of consecutive tokens). A burst's prompts all fit in one iteration's token budget (the
  prompt is cut to ``budget // batch``), so every iteration after the first is decode only:
  the steady-state window of Cornfigurator 5.1 (ramp-up is the burst's one prefill iteration,
  there is no ramp-down: every sequence stops at the same token);
* the **front end** (:func:`frontend_latency`): client TTFT minus the engine's queueing and
  prefill at concurrency 1 (the HTTP hop, the API server, the IPC to the engine core and back),
  a constant added to every simulated first token;
* the **delivery cost** (:func:`fit_delivery`): per streamed token, client TPOT minus the
  engine's inter-token time in each burst, i.e. what the API server and the client add to every
  token on its way out, as a line in the number of streams in flight,
  ``per_token(b) = base + per_stream b`` (non-negative least squares over the bursts). The
  simulator adds ``(tokens - 1) per_token(b)`` to a request's finish, ``b`` the mean number of
  simulated requests decoding while it decodes.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import nnls

from omniplane.fidelity.engine import EngineConfig
from omniplane.fidelity.idle import IdlePlan
from omniplane.fidelity.mixed import MixedPlan
from omniplane.perf.profiler import PointMetrics, RequestSpec
from omniplane.perf.profiles import ProfileRow

WARMUP = "warmup"


@dataclass(frozen=True)
class ProbePlan:
    """What one probe measures (defaults: the benchmark; :meth:`quick`: the tests)."""

    prefill_sizes: tuple[int, ...] = (16, 64, 256, 1024)
    prefill_rounds: int = 3  # requests per prefill point (concurrency 1; the window holds all but the first)
    # every probe measures decode batches up to the engine's max_num_seqs (cut to it): a load near
    # capacity runs at its 128-sequence cap, and a step model that only saw batches <= 32 held
    # the per-sequence cost of 32 there (lead's quiet run, b0e6bd8: 128 x 32-token contexts measured
    # 41.8 ms per iteration in the capacity probe; the loads' models without that row gave 70-71 ms)
    decode_batches: tuple[int, ...] = (1, 4, 16, 32, 64, 128)
    decode_rounds: int = 2  # bursts per decode point
    decode_tokens: int = 32
    long_context: int = 1024
    long_batches: tuple[int, ...] = (1, 2)
    capacity_batches: tuple[int, ...] = ()  # further batches only in the probe before the capacity run
    capacity_s: float = 30.0  # the closed loop at the largest batch runs this long
    capacity_concurrency: int = 0  # workers of the capacity point (0: the engine's max_num_seqs)
    # mixed iterations (a prompt chunk batched with decodes, omniplane.fidelity.mixed), in every
    # probe: a served load runs mostly those, and the decode-only bursts cannot price them
    mixed: MixedPlan = field(default_factory=MixedPlan)
    # requests after an idle gap (omniplane.fidelity.idle), in every probe: every other point is
    # sent back to back, a light load's arrivals often find the engine idle
    idle: IdlePlan = field(default_factory=IdlePlan)

    @classmethod
    def quick(cls) -> ProbePlan:
        """A short probe for tests: its capacity is at 16 workers, not the largest batch; no
        mixed iterations and no idle gaps (both probes are tested on a loopback server)."""
        return cls((32, 256), 2, (1, 4), 1, 8, 512, (1,), (16,), 6.0, 16, MixedPlan(decodes=()),
                   IdlePlan(gaps_ms=()))


def probe_specs(plan: ProbePlan, engine: EngineConfig, typical_prompt: int,
                capacity: bool = False) -> tuple[RequestSpec, ...]:
    """One probe's request specs for this engine (module docstring); ``capacity`` adds the large
    batches the capacity run reaches."""
    room = engine.max_model_len - plan.decode_tokens - 1
    budget = engine.max_num_batched_tokens
    # one request first: a stall after idle is not a row (a burst of one: no window to fill)
    specs = [RequestSpec(WARMUP, 16, 2, concurrency=(1,), burst=True, rounds=1)]
    specs += [RequestSpec(f"prefill-{p}", p, 1, concurrency=(1,), rounds=plan.prefill_rounds)
              for p in plan.prefill_sizes if p <= min(room, budget)]
    batches = plan.decode_batches + (plan.capacity_batches if capacity else ())
    for b in sorted({b for b in batches if b <= engine.max_num_seqs}):
        prompt = max(1, min(typical_prompt, budget // b, room))
        specs.append(RequestSpec(f"decode-{prompt}-b{b}", prompt, plan.decode_tokens, concurrency=(b,),
                                 burst=True, rounds=plan.decode_rounds))
    for b in plan.long_batches:
        if b <= engine.max_num_seqs and b * plan.long_context <= budget and plan.long_context <= room:
            specs.append(RequestSpec(f"decode-{plan.long_context}-b{b}", plan.long_context,
                                     plan.decode_tokens, concurrency=(b,), burst=True, rounds=1))
    return tuple(specs)


def capacity_spec(plan: ProbePlan, engine: EngineConfig, sizes: Sequence[tuple[int, int]]) -> RequestSpec:
    """The capacity point: a closed loop of ``max_num_seqs`` workers sending the workload's sizes."""
    workers = min(plan.capacity_concurrency or engine.max_num_seqs, engine.max_num_seqs)
    return RequestSpec("capacity", sizes[0][0], sizes[0][1], concurrency=(workers,), sizes=tuple(sizes),
                       duration_s=plan.capacity_s)


def _is_burst(p: PointMetrics) -> bool:
    return p.request.startswith("decode-")


def probe_rows(points: Sequence[PointMetrics], component: str, gpu: str, label: str) -> list[ProfileRow]:
    """The step-model rows of one probe's points (module docstring): engine times, in ms."""
    rows = []
    for p in points:
        src = f"measured: {label} request={p.request} c={p.concurrency} n={p.n_window}"
        prompt = p.prompt_tokens
        if p.request.startswith("prefill-") and p.concurrency == 1:
            t = p.server_s.get("prefill")
            if t is None and (ttft := p.median("ttft")) is not None:
                t = ttft - (p.queue_time_s or 0.0)  # a server without vLLM's histograms
            if t is not None and t > 0 and prompt is not None:
                rows.append(ProfileRow(component, gpu, 1, "prefill", 1, prompt, t * 1e3, src))
        elif _is_burst(p) and p.output_tokens > 1 and prompt is not None:
            t = p.server_s.get("itl", p.median("tpot"))
            if t is not None and t > 0:
                context = prompt + p.output_tokens / 2
                rows.append(ProfileRow(component, gpu, 1, "decode", p.concurrency, context, t * 1e3, src))
    return rows


def frontend_latency(points: Sequence[PointMetrics]) -> float:
    """Median over the concurrency-1 prefill points of client TTFT minus the engine's queueing
    and prefill, in s (0 when the engine reports neither)."""
    xs = [f for p in points
          if p.concurrency == 1 and p.request.startswith("prefill-") and (f := p.frontend_s) is not None]
    return max(0.0, statistics.median(xs)) if xs else 0.0


@dataclass(frozen=True)
class Delivery:
    """What the serving front end adds to each streamed token, with ``b`` streams in flight."""

    base_s: float
    per_stream_s: float
    points: tuple[tuple[int, float], ...] = ()  # (streams, client TPOT - engine ITL in s) per burst

    def per_token(self, streams: float) -> float:
        return self.base_s + self.per_stream_s * streams

    def to_json(self) -> dict[str, Any]:
        return {"base_ms": self.base_s * 1e3, "per_stream_ms": self.per_stream_s * 1e3,
                "points_ms": [[b, d * 1e3] for b, d in self.points],
                "source": "measured: the probes' bursts, client TPOT (median) minus the engine's mean "
                          "inter-token latency, least squares (>= 0) in the burst's streams"}


def fit_delivery(points: Sequence[PointMetrics]) -> Delivery:
    """:class:`Delivery` fitted to the bursts that report both times (zero without any)."""
    pts = [(p.concurrency, tpot - itl) for p in points if _is_burst(p)
           and (tpot := p.median("tpot")) is not None and (itl := p.server_s.get("itl")) is not None]
    if not pts:
        return Delivery(0.0, 0.0)
    a = np.array([[1.0, float(b)] for b, _ in pts])
    y = np.array([d for _, d in pts])
    (base, slope), _ = nnls(a, np.maximum(y, 0.0))
    return Delivery(float(base), float(slope), tuple((b, float(d)) for b, d in pts))


def decode_streams(first: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """Per request, the mean number of requests decoding (between first token and finish,
    itself included) over its own decode interval (1 for an empty interval)."""
    lo = np.maximum(first[:, None], first[None, :])
    hi = np.minimum(finish[:, None], finish[None, :])
    overlap = np.clip(hi - lo, 0.0, None).sum(axis=1)
    span = finish - first
    return np.where(span > 0, overlap / np.where(span > 0, span, 1.0), 1.0)


def mean_rows(rows: Sequence[ProfileRow], source: str) -> list[ProfileRow]:
    """One row per (component, gpu, tp, op, batch, size): the mean over the probes (a table file
    holds a point once)."""
    by: dict[tuple[str, str, int, str, int, float], list[float]] = {}
    for r in rows:
        by.setdefault((r.component, r.gpu, r.tp, r.op, r.batch, r.size), []).append(r.latency_ms)
    return [ProfileRow(c, g, tp, op, b, s, float(np.mean(v)), f"{source} (mean of {len(v)})")
            for (c, g, tp, op, b, s), v in by.items()]


def probe_drift(before: Sequence[ProfileRow], after: Sequence[ProfileRow]) -> float | None:
    """Median over the rows both probes measured of |after / before - 1|: how much the host
    moved between the two probes bracketing a replay."""
    a = {(r.op, r.batch, r.size): r.latency_ms for r in after}
    xs = [abs(a[k] / r.latency_ms - 1) for r in before
          if (k := (r.op, r.batch, r.size)) in a and r.latency_ms > 0]
    return float(statistics.median(xs)) if xs else None
