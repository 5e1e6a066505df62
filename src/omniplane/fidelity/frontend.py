"""The serving front end as a shared CPU resource: a calibration of **this host's environment**,
not of any policy (docs/guides/check-your-engine.md, "What is fitted to what").

On this host vLLM's CPU worker owns core 0 and the API server, the engine-core process and the
load generator share core 1 (:mod:`omniplane.loadgen.affinity`). Every request costs that core
CPU time on its way in (the client builds and sends it, the API server parses a token-id prompt
and hands it to the engine core) and every streamed token on its way out (the API server decodes
the engine core's output message and writes an SSE chunk, the client reads and parses it). Near
capacity that core is busy (~0.93 in a measured capacity run), so the front end is not the
constant the concurrency-1 probe measures: requests and tokens queue for it.

**The model.** One server at ``cores`` cores' speed (1: the API server is one asyncio thread and
the client one process, both pinned to one core) serving, first come first served in the order
they become ready:

* each request's **admission** when it arrives, costing ``per_request + per_prompt_token P``;
  its wait delays the request's arrival at the engine;
* each engine iteration's **output message** when the iteration ends (the simulator's step
  trace; a decode span of ``n`` iterations split evenly: an approximation), costing
  ``per_iteration`` (the API server decodes one message per iteration for all its streams);
* each streamed **token** right behind its iteration's message (:func:`on_grid`), costing
  ``per_token``; a token's wait delays the client's receipt of it. An iteration's ``b`` tokens
  leave one after another, as they do from the real API server, so a first token that lands in
  a busy iteration waits for the streams ahead of it.

Without a step trace the old approximation is kept: tokens spaced evenly between a request's
first token and finish, each costing ``per_token + per_iteration / b`` (``b`` streams sharing
one message).

At zero load nobody waits, and the constant ``latency`` (the concurrency-1 front end the probes
measure: HTTP hop, API server, IPC, with one request's own service in it) is added to every
first token and finish, as before. So the queue adds only **waiting**; with zero costs the model
is the constant front end exactly.

**What each constant is fitted to.** The probes' points only (never a replay, never one point):
per probe point, the CPU seconds of the API server (the engine group's leader) and of the load
generator's process while the point ran (:func:`omniplane.loadgen.affinity.cpu_split` through
``run_profile``'s meter, the scheduler's nanosecond counters), against the point's requests,
prompt tokens, streamed tokens and iterations (``output tokens / concurrency``: exact for a
burst, whose streams all decode every iteration, and for a concurrency-1 point; an
approximation for anything else), non-negative least squares on relative error. The prefill
points (1 token per request, 16-1,024-token prompts) and the decode bursts (1-128 streams of 32
tokens) identify the four terms jointly. The engine core's CPU (busy-waiting on the worker's
queue, vLLM's ``SpinCondition``, which yields the core to any other runnable thread) is
reported, not charged: it spins in the core's idle time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import nnls

from omniplane.perf.profiler import PointMetrics

PARTS = ("api", "client")  # cpu_split parts that are the front end (the rest: worker, engine core)
TERMS = ("per_request", "per_prompt_token", "per_token", "per_iteration")
MIN_CPU_S = 1e-3  # a point's CPU below this is not a sample (relative error undefined near 0)
FIXED_POINT_ITERS = 8  # the engine and the front end are re-simulated until the waits agree
FIXED_POINT_TOL_S = 1e-3


@dataclass(frozen=True)
class CpuSample:
    """One probe point's front-end CPU against what the point moved."""

    label: str
    requests: int
    prompt_tokens: int
    output_tokens: int
    iterations: float
    cpu_s: float  # API server + client
    wall_s: float
    wait_s: float = 0.0  # seconds their threads were runnable but waiting for a CPU (schedstat)

    def features(self) -> np.ndarray:
        return np.array([self.requests, self.prompt_tokens, self.output_tokens, self.iterations], float)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "output_tokens": self.output_tokens, "iterations": round(self.iterations, 2),
                "cpu_ms": round(self.cpu_s * 1e3, 3), "wait_ms": round(self.wait_s * 1e3, 3),
                "wall_s": round(self.wall_s, 3)}


def cpu_samples(points: Sequence[PointMetrics]) -> list[CpuSample]:
    """The points that carry CPU readings and moved something (module docstring)."""
    out = []
    for p in points:
        if not p.cpu_s or p.n_total <= 0 or p.output_total <= 0 or not all(k in p.cpu_s for k in PARTS):
            continue
        cpu = sum(p.cpu_s[k] for k in PARTS)
        wait = sum(p.cpu_s.get(f"{k}_wait", 0.0) for k in PARTS)
        if cpu >= MIN_CPU_S:
            out.append(CpuSample(f"{p.request} c={p.concurrency}", p.n_total, p.prompt_total, p.output_total,
                                 p.output_total / max(1, p.concurrency), cpu, p.wall_s, wait))
    return out


@dataclass(frozen=True)
class FrontEnd:
    """The front end of one calibration: a constant ``latency_s`` and a FIFO CPU queue."""

    latency_s: float
    per_request_s: float = 0.0
    per_prompt_token_s: float = 0.0
    per_token_s: float = 0.0
    per_iteration_s: float = 0.0
    cores: float = 1.0  # assumption: the front end's processes share one core (module docstring)
    samples: tuple[CpuSample, ...] = ()
    residuals: tuple[float, ...] = ()  # relative in-sample error per sample
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def queued(self) -> bool:
        return any(c > 0 for c in (self.per_request_s, self.per_prompt_token_s, self.per_token_s,
                                   self.per_iteration_s))

    def request_cost(self, prompt_tokens: float) -> float:
        return self.per_request_s + self.per_prompt_token_s * prompt_tokens

    def token_cost(self, streams: float) -> float:
        return self.per_token_s + self.per_iteration_s / max(1.0, streams)

    def demand(self, rate: float, prompt: float, tokens: float, streams: float) -> float:
        """Busy cores at ``rate`` requests/s of that mean size with ``streams`` decoding at once."""
        return rate * (self.request_cost(prompt) + tokens * self.token_cost(streams)) / self.cores

    def to_json(self) -> dict[str, Any]:
        errs = sorted(abs(e) for e in self.residuals)
        return {"latency_ms": self.latency_s * 1e3, "per_request_ms": self.per_request_s * 1e3,
                "per_prompt_token_us": self.per_prompt_token_s * 1e6, "per_token_ms": self.per_token_s * 1e3,
                "per_iteration_ms": self.per_iteration_s * 1e3, "cores": self.cores,
                "runnable_share": measured_share(self.samples),
                "in_sample_error": {"median": float(np.median(errs)) if errs else None,
                                    "max": errs[-1] if errs else None},
                "samples": [s.to_json() for s in self.samples], "notes": list(self.notes),
                "source": "fitted: the probes' points, CPU seconds of the API server and the load "
                          "generator (schedstat) against requests, prompt tokens, streamed tokens and "
                          "iterations, NNLS on relative error; latency: the concurrency-1 front end"}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FrontEnd:
        return cls(d["latency_ms"] / 1e3, d["per_request_ms"] / 1e3, d["per_prompt_token_us"] / 1e6,
                   d["per_token_ms"] / 1e3, d["per_iteration_ms"] / 1e3, float(d.get("cores", 1.0)))


def measured_share(samples: Sequence[CpuSample]) -> float | None:
    """The share of a core the front end's threads got while they were runnable over the
    samples: CPU / (CPU + waiting for a CPU); None without wait readings."""
    cpu = sum(s.cpu_s for s in samples)
    wait = sum(s.wait_s for s in samples)
    return cpu / (cpu + wait) if wait > 0 and cpu > 0 else None


def fit_frontend(samples: Sequence[CpuSample], latency_s: float, cores: float = 1.0) -> FrontEnd:
    """The four CPU costs (module docstring) fitted to ``samples``, served at ``cores`` (default
    one: the physical limit of one thread each; :func:`measured_share` is reported next to it,
    and ``scripts/fidelity_resim.py`` runs it as a what-if); a constant front end (the old model)
    with a note when there are fewer samples than terms."""
    if len(samples) < len(TERMS):
        note = f"{len(samples)} CPU samples for {len(TERMS)} terms: front end left constant"
        return FrontEnd(latency_s, cores=cores, samples=tuple(samples), notes=(note,))
    x = np.array([s.features() for s in samples])
    y = np.array([s.cpu_s for s in samples])
    coef, _ = nnls(x / y[:, None], np.ones(len(y)))
    notes = []
    if np.linalg.matrix_rank(x) < len(TERMS):
        notes.append("the samples do not determine every term (rank-deficient): NNLS picked one solution")
    res = tuple(float(v) for v in (x @ coef - y) / y)
    c = [float(v) for v in coef]
    return FrontEnd(latency_s, c[0], c[1], c[2], c[3], cores=cores, samples=tuple(samples), residuals=res,
                    notes=tuple(notes))


def fifo_waits(release: np.ndarray, cost: np.ndarray, cores: float = 1.0) -> np.ndarray:
    """Per item, how long it waits before its service starts at one first-come-first-served
    server of speed ``cores``, items served in order of ``release`` (ties: given order)."""
    waits = np.zeros(len(release))
    t = -math.inf
    for i in np.argsort(release, kind="stable"):
        start = max(float(release[i]), t)
        waits[i] = start - release[i]
        t = start + float(cost[i]) / cores
    return waits


@dataclass(frozen=True)
class Served:
    """Per request (in the order given): its admission wait, and the wait of its first and of its
    last streamed token."""

    admit: np.ndarray
    first: np.ndarray
    last: np.ndarray
    busy_s: float  # the front end's total service time (core seconds / cores)
    span_s: float  # first release to the end of the last service


def nearest(grid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time in ``t``, the index of the closest point of the sorted ``grid`` (ties: earlier)."""
    i = np.clip(np.searchsorted(grid, t), 1, len(grid) - 1)
    return np.where(np.abs(grid[i - 1] - t) <= np.abs(grid[i] - t), i - 1, i)


def tokens_of(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per streamed token (requests' tokens one after another): its request and its index in it."""
    owner = np.repeat(np.arange(len(counts)), counts)
    starts = np.cumsum(counts) - counts
    return owner, np.arange(len(owner)) - starts[owner]


def on_grid(grid: np.ndarray, first: np.ndarray, finish: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each request's ``counts`` token release times on the engine's iteration ends ``grid``
    (sorted): the first at the grid point nearest its first token, the last at the one nearest
    its finish, the others spread evenly by index over the points between (one per iteration
    when the request decoded in every one; a preempted request has more points than tokens and
    its tokens are spread over its gap: an approximation). A request that never finished
    (non-finite first or finish) releases its first token at its first-token time and no other
    (inf)."""
    owner, k = tokens_of(counts)
    ok = np.isfinite(first) & np.isfinite(finish) & (len(grid) > 0)
    lo = np.zeros(len(first), int)
    hi = np.zeros(len(first), int)
    if ok.any():
        lo[ok], hi[ok] = nearest(grid, first[ok]), nearest(grid, finish[ok])
    span = np.maximum(hi - lo, 0) / np.maximum(counts - 1, 1)
    unfinished = np.where(k == 0, first[owner], np.inf)
    if not ok.any():
        return unfinished
    idx = lo[owner] + np.rint(k * span[owner]).astype(int)
    return np.where(ok[owner], grid[idx], unfinished)


def serve(fe: FrontEnd, arrival: np.ndarray, prompt: np.ndarray, first: np.ndarray, finish: np.ndarray,
          tokens: np.ndarray, streams: np.ndarray, grid: np.ndarray | None = None) -> Served:
    """Queue every request's admission and tokens through the front end (module docstring).

    Without ``grid`` a request's tokens are spaced evenly between its first token and finish,
    each costing ``token_cost(b)``. Given ``grid``, the engine's iteration ends (sorted), tokens
    are released when the engine emits them (:func:`on_grid`): every iteration end that releases
    a token is one output message costing ``per_iteration`` (the API server decodes one message
    per engine iteration for all its streams), queued ahead of that instant's tokens, each then
    costing ``per_token``; within an instant, tokens queue by their request's arrival (vLLM emits
    a step's outputs in its running order, oldest first: an approximation). So a burst of ``b``
    tokens leaves one after another, as it does from the real API server. The message's cost is
    taken off its own tokens' waits: at zero load it is part of the measured constant ``latency``.
    """
    n = len(arrival)
    counts = np.maximum(tokens, 1).astype(int)
    owner, k = tokens_of(counts)
    adm_cost = np.array([fe.request_cost(p) for p in prompt]) if n else np.zeros(0)
    if grid is None:
        gap = np.where(counts > 1, (finish - first) / np.maximum(counts - 1, 1), 0.0)
        tok_release = first[owner] + k * gap[owner]
        tok_cost = np.array([fe.token_cost(b) for b in streams])[owner] if n else np.zeros(0)
        msg_release, own_msg = np.zeros(0), np.zeros(len(tok_release))
    else:
        tok_release = on_grid(np.asarray(grid, float), first, finish, counts)
        tok_cost = np.full(len(tok_release), fe.per_token_s)
        fin = np.isfinite(tok_release)
        msg_release = np.unique(tok_release[fin]) if fe.per_iteration_s > 0 else np.zeros(0)
        own_msg = np.where(fin, fe.per_iteration_s / fe.cores, 0.0)
    m = len(msg_release)
    release = np.concatenate([arrival, msg_release, tok_release])
    cost = np.concatenate([adm_cost, np.full(m, fe.per_iteration_s), tok_cost])
    waits = fifo_waits(release, cost, fe.cores)
    tok_wait = np.maximum(waits[n + m:] - own_msg, 0.0)
    ends = np.cumsum(counts)
    ok = np.isfinite(release + waits)
    span = float((release + waits + cost / fe.cores)[ok].max() - release[ok].min()) if ok.any() else 0.0
    busy = float(cost[ok].sum()) / fe.cores
    return Served(waits[:n], tok_wait[ends - counts], tok_wait[ends - 1], busy, span)


Run = tuple[np.ndarray, np.ndarray, np.ndarray | None]  # first, finish, iteration ends (or None)


def fixed_point(fe: FrontEnd, arrival: np.ndarray, prompt: np.ndarray, tokens: np.ndarray,
                engine: Callable[[np.ndarray], Run], streams: Callable[[np.ndarray, np.ndarray], np.ndarray],
                ) -> tuple[np.ndarray, np.ndarray, Served, dict[str, float]]:
    """The engine (``engine(arrival at the engine) -> (first, finish, iteration ends or None)``)
    and the front end simulated in turn until the admission waits agree within 1 ms (at most 8
    rounds; the last change is reported): the engine sees requests when the front end has
    admitted them, the front end sees tokens when the engine emits them."""
    admit = np.zeros(len(arrival))
    change = math.inf
    rounds = 0
    while True:
        rounds += 1
        first, finish, grid = engine(arrival + admit)
        served = serve(fe, arrival, prompt, first, finish, tokens, streams(first, finish), grid)
        change = float(np.max(np.abs(served.admit - admit))) if len(admit) else 0.0
        admit = served.admit
        if change < FIXED_POINT_TOL_S or rounds >= FIXED_POINT_ITERS:
            break
    return first, finish, served, {"rounds": rounds, "last_change_ms": change * 1e3}
