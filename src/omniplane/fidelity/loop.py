"""The fidelity loop: profile a live engine, fit its step model, simulate a workload on it,
replay the same workload against the engine, and put predicted next to measured.

1. **Engine config** from the engine itself (:mod:`omniplane.fidelity.engine`): max batch,
   token budget, KV blocks; the simulator's LLM engine is configured with exactly these.
2. **Capacity**: a probe (:mod:`omniplane.fidelity.calibrate`) with the large batches, then
   the request throughput of a closed loop of ``max_num_seqs`` workers sending the workload's
   own sizes in its steady-state window (Cornfigurator 5.1), then a probe. The loads are
   fractions of it.
3. For each load (a fraction of the measured capacity): the workload's requests at that rate
   (seeded), replayed open loop with ``omniplane loadgen`` (completions API, token-id prompts)
   ``repeats`` times, **every replay between two probes**. The load's environment calibration
   is fitted to those probes only (never to a replay): the step model
   (:mod:`omniplane.perf.steptime`, checked point by point on held-out probe rows), the front
   end and the per-token delivery cost. The simulator predicts the load on them; both sides are
   summarised by :mod:`omniplane.fidelity.compare`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from omniplane.fidelity.calibrate import (
    WARMUP,
    Delivery,
    ProbePlan,
    capacity_spec,
    fit_delivery,
    frontend_latency,
    mean_rows,
    probe_drift,
    probe_rows,
    probe_specs,
)
from omniplane.fidelity.compare import mean_ttft_ms, measured_timings, summarize, ttft_decomposition
from omniplane.fidelity.engine import EngineConfig, read_engine_config
from omniplane.fidelity.frontend import FrontEnd, cpu_samples, fit_frontend
from omniplane.fidelity.idle import ColdStart, IdleSample, fit_cold, run_idle
from omniplane.fidelity.mixed import run_mixed
from omniplane.fidelity.simulate import component_of, simulate_engine
from omniplane.loadgen.affinity import cpu_split
from omniplane.loadgen.client import LoadOptions, replay
from omniplane.loadgen.metrics import COMPLETED, send_lateness
from omniplane.perf import ProfileSet
from omniplane.perf.profiler import PointMetrics, ProfileRun, SweepResult, run_profile
from omniplane.perf.profiler.client import server_means, server_totals_at
from omniplane.perf.profiles import ProfileRow
from omniplane.perf.steptime import MixedRow, RowFit, StepModel, fit_step_model, holdout_fits
from omniplane.spec import ResolvedWorkload
from omniplane.workload import Request, generate

Say = Callable[[str], None]
OVERLOAD = 3.0  # the simulated capacity: the simulator fed this many times the measured capacity
OVERLOAD_REQUESTS = 600


@dataclass(frozen=True)
class FidelityOptions:
    url: str
    workload: ResolvedWorkload
    loads: tuple[float, ...] = (0.3, 0.6, 0.9)
    duration_s: float = 40.0
    seed: int | None = None
    component: str = ""  # the LLM the requests exercise (default: the model's only LLM)
    plan: ProbePlan = field(default_factory=ProbePlan)
    given: dict[str, int] = field(default_factory=dict)  # engine settings it does not report
    table: Path | None = None  # where to write the profile table (CSV)
    gpu: str = "cpu"  # the table's gpu column: the engine's hardware, as a label
    drain_s: float = 120.0
    repeats: int = 2  # replays of each load (the same requests); measured = the median of each metric
    engine_pgid: int | None = None  # the engine's process group (--fixture): CPU shares are read
    worker_pids: tuple[int, ...] = ()  # its processes holding the bound threads (Pinning.worker_pids)


@dataclass(frozen=True)
class Probe:
    """One probe's points (warm-up dropped) and the step-model rows they give."""

    index: int
    at: float  # seconds since the loop started
    machine_load: list[float] | None
    points: tuple[PointMetrics, ...]
    rows: tuple[ProfileRow, ...]
    mixed: tuple[MixedRow, ...] = ()  # mixed iterations (omniplane.fidelity.mixed)
    mixed_dropped: int = 0
    idle: tuple[IdleSample, ...] = ()  # requests after an idle gap (omniplane.fidelity.idle)
    idle_engine: tuple[dict[str, float], ...] = ()  # per gap, the engine's own means (a report)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "at_s": round(self.at, 1), "machine_load": self.machine_load,
                "rows": [{"op": r.op, "batch": r.batch, "size": r.size, "ms": round(r.latency_ms, 3)}
                         for r in self.rows],
                "mixed": [m.to_json() for m in self.mixed], "mixed_dropped": self.mixed_dropped,
                "idle": [s.to_json() for s in self.idle], "idle_engine_ms": list(self.idle_engine),
                "points": [p.to_json() for p in self.points]}


@dataclass(frozen=True)
class Calibration:
    """One load's environment, fitted to the probes around its replays."""

    step: StepModel
    frontend_s: float
    delivery: Delivery
    holdout: tuple[RowFit, ...]
    drift: float | None
    probes: tuple[int, ...]
    frontend: FrontEnd | None = None  # the front end as a CPU queue (omniplane.fidelity.frontend)
    cold: ColdStart = field(default_factory=ColdStart)  # after idle (omniplane.fidelity.idle)

    def to_json(self) -> dict[str, Any]:
        errs = sorted(abs(f.error) for f in self.holdout)
        return {
            "probes": list(self.probes),
            "step_model": self.step.to_json(),
            "holdout": {"median": float(np.median(errs)) if errs else None, "max": errs[-1] if errs else None,
                        "rows": [{**f.__dict__, "error": f.error} for f in self.holdout],
                        "source": "each probe point predicted by the step model fitted to the other points"},
            "frontend_ms": self.frontend_s * 1e3,
            "delivery": self.delivery.to_json(),
            "probe_drift": self.drift,
            "frontend_queue": self.frontend.to_json() if self.frontend is not None else None,
            "cold_start": self.cold.to_json(),
        }


def calibrate(probes: Sequence[Probe], comp: str, engine: EngineConfig, source: str) -> Calibration:
    """The environment of the replays these probes bracket (module docstring); probes only."""
    rows = [r for p in probes for r in p.rows]
    mixed = [m for p in probes for m in p.mixed]
    points = [pt for p in probes for pt in p.points]
    limits = engine.limits()
    step = fit_step_model(rows, comp, limits, source=source, mixed=mixed)
    latency = frontend_latency(points)
    return Calibration(step, latency, fit_delivery(points),
                       holdout_fits(rows, comp, limits, mixed), probe_drift(probes[0].rows, probes[-1].rows),
                       tuple(p.index for p in probes), fit_frontend(cpu_samples(points), latency),
                       fit_cold([s for p in probes for s in p.idle]))


def _sizes(requests: Sequence[Request], comp: str) -> list[tuple[int, int]]:
    return [(int(r.work[comp]["prompt_tokens"]), int(r.work[comp]["output_tokens"])) for r in requests]


# assumption: a closed loop of 128 streams on a loaded 2-core host can lose a connection (httpx
# ReadError seen once at load average 18, nothing in the server's log); this share of failed
# requests still measures the capacity (they count as not completed), more does not
CAPACITY_ERRORS = 0.01


def _few_errors(result: SweepResult) -> bool:
    pts = [p for p in result.points if p.request == "capacity"]
    return bool(pts) and all(p.n_errors <= CAPACITY_ERRORS * p.n_total for p in pts)


def capacity(result: SweepResult) -> float:
    rates = [p.request_throughput for p in result.points if p.request == "capacity" and p.n_window > 0]
    if not rates:
        raise RuntimeError("the capacity point measured nothing in its steady-state window "
                           f"({result.error or 'no requests completed'})")
    return max(rates)


def _replay(requests: Sequence[Request], load: LoadOptions,
            meter: Callable[[], dict[str, float] | None] = lambda: None,
            ) -> tuple[dict[str, float | None], dict[str, Any]]:
    """One open-loop replay: its summary and what happened (counts, the engine's own means and,
    given a ``meter`` (:func:`cpu_split`), each part's busy and CPU-waiting cores over it)."""
    before = asyncio.run(server_totals_at(load.url))
    it0 = asyncio.run(_iteration_totals(load.url))
    cpu0, wall0 = meter(), time.monotonic()
    records = asyncio.run(replay(requests, load))
    cpu = _cpu_shares(cpu0, meter(), time.monotonic() - wall0)
    server = server_means(before, asyncio.run(server_totals_at(load.url)))
    it1 = asyncio.run(_iteration_totals(load.url))
    its = {k: it1[k] - it0.get(k, 0.0) for k in it1}
    timings = measured_timings(records)
    summary = summarize(timings)
    return summary, {
        # how late the load generator sent requests: a busy machine stalls the client too, and
        # a run whose sends were late measured the machine as much as the engine
        "send_late_ms": send_lateness(records),
        "completed": sum(r.status == COMPLETED for r in records),
        "lost": sum(r.status == "lost" for r in records),
        "unfinished": sum(r.status == "unfinished" for r in records),  # still running at the deadline
        "failed": sum(r.status in ("failed", "shed") for r in records),
        "errors": sorted({r.error for r in records if r.error})[:5],
        # the engine's own means over the replay (vLLM's histograms): where the time went; read
        # for the report only, never fitted to
        "server_ms": {k: v * 1e3 for k, v in server.items()},
        # what the engine ran (vLLM's counters): iterations, their mean scheduled tokens, preemptions
        "engine_iterations": {**its, "tokens_per_iteration": its["tokens"] / its["iterations"]}
        if its.get("iterations") else its,
        "ttft_mean_ms": mean_ttft_ms(timings),
        # busy / CPU-waiting cores per part over the replay (engine core = server - api): a report
        "cpu_cores": cpu or None,
        "machine_load": _machine_load(),
        "summary": summary,
    }


def _median_metrics(runs: Sequence[dict[str, float | None]]) -> dict[str, float | None]:
    """Per metric, the median over repeated replays of one load (the run itself when one)."""
    out: dict[str, float | None] = {}
    for k in runs[0]:
        vals = [v for r in runs if (v := r[k]) is not None]
        out[k] = float(statistics.median(vals)) if vals else None
    return out


def _cpu(opts: FidelityOptions) -> dict[str, float] | None:
    return cpu_split(opts.engine_pgid, opts.worker_pids) if opts.engine_pgid is not None else None


def _cpu_shares(before: dict[str, float] | None, after: dict[str, float] | None,
                wall_s: float) -> dict[str, float]:
    """Busy cores of each part between two :func:`cpu_split` readings."""
    if before is None or after is None or wall_s <= 0:
        return {}
    return {k: (after[k] - before.get(k, 0.0)) / wall_s for k in after}


async def _iteration_totals(url: str) -> dict[str, float]:
    """The engine's iteration counters (vLLM's ``vllm:iteration_tokens_total`` histogram: one
    observation per iteration, its scheduled tokens; ``vllm:num_preemptions_total``)."""
    want = {"vllm:iteration_tokens_total_sum": "tokens", "vllm:iteration_tokens_total_count": "iterations",
            "vllm:num_preemptions_total": "preemptions"}
    out: dict[str, float] = {}
    async with httpx.AsyncClient(timeout=10.0) as client:
        try:
            resp = await client.get(f"{url}/metrics")
        except httpx.HTTPError:
            return out
    for line in resp.text.splitlines() if resp.status_code == 200 else ():
        key = want.get(line.split("{", 1)[0].split(" ", 1)[0])
        if key is not None:
            with contextlib.suppress(ValueError):
                out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[-1])
    return out


def _machine_load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


CALIBRATION = (
    "per load, fitted to the probes taken immediately before and after each of its replays "
    "(never to a replay): step model (NNLS on relative error, engine prefill times and engine "
    "inter-token latencies of bursts), front end (client TTFT - engine queue - engine prefill at "
    "concurrency 1, median), front-end queue (CPU seconds of the API server and the client per "
    "probe point against its requests, prompt tokens, streamed tokens and iterations, NNLS; the "
    "simulator queues every admission and token through one core for it), delivery (client TPOT - "
    "engine ITL of bursts, linear in streams; a check when the queue is fitted); the capacity's, to "
    "the probes around the capacity run")


def run_fidelity(opts: FidelityOptions, say: Say | None = None) -> dict[str, Any]:
    """The whole loop (module docstring); returns the ``out/fidelity.json`` document."""
    tell = say or (lambda _msg: None)
    t0 = time.monotonic()
    model = opts.workload.model
    comp = component_of(model, opts.component)
    vocab = model.component(comp).size.vocab
    if vocab is None:
        raise ValueError(f"model {model.name}: component {comp} has no size.vocab "
                         "(token-id prompts need it)")
    engine = read_engine_config(opts.url, opts.given)
    tell(f"engine: max_num_seqs {engine.max_num_seqs}, max_num_batched_tokens "
         f"{engine.max_num_batched_tokens}, KV {engine.kv_tokens} tokens "
         f"(from {engine.sources.get('max_num_seqs')})")
    seed = opts.workload.spec.seed if opts.seed is None else opts.seed
    sizes = _sizes(generate(opts.workload, n=256, seed=seed + 1), comp)
    typical = int(np.median([p for p, _ in sizes]))
    base = ProfileRun(engine.url, engine.model, comp, opts.gpu, 1, (), requests_per_worker=1,
                      api="completions", vocab=vocab)
    probes: list[Probe] = []

    def probe(with_capacity: bool = False) -> Probe:
        n = len(probes)
        specs = probe_specs(opts.plan, engine, typical, capacity=with_capacity)
        meter = (lambda: _cpu(opts) or {}) if opts.engine_pgid is not None else None
        res = run_profile(replace(base, requests=specs, salt=seed * 1000 + n), meter=meter)
        if res.error:
            raise RuntimeError(f"probe {n} failed: {res.error}")
        points = tuple(p for p in res.points if p.request != WARMUP)
        label = f"omniplane fidelity probe {n} of {engine.url}"
        mix = run_mixed(engine.url, engine.model, vocab, opts.plan.mixed, engine.max_num_seqs,
                        engine.max_num_batched_tokens, f"{seed}:{n}", label)
        if mix.error:
            raise RuntimeError(f"probe {n}'s mixed iterations failed: {mix.error}")
        idle = run_idle(engine.url, engine.model, vocab, opts.plan.idle, typical, f"{seed}:{n}")
        if idle.error:
            raise RuntimeError(f"probe {n}'s idle gaps failed: {idle.error}")
        p = Probe(n, time.monotonic() - t0, _machine_load(), points,
                  tuple(probe_rows(points, comp, opts.gpu, label)), mix.samples, mix.dropped,
                  idle.samples, idle.engine_ms)
        probes.append(p)
        return p

    def source(ps: Sequence[Probe]) -> str:
        return f"measured: omniplane fidelity probes {[p.index for p in ps]} of {engine.url}"

    tell("probe, capacity (closed loop of "
         f"{capacity_spec(opts.plan, engine, sizes).concurrency[0]} workers), probe")
    before = probe(with_capacity=True)
    cpu0, wall0 = _cpu(opts), time.monotonic()
    cap_result = run_profile(replace(base, requests=(capacity_spec(opts.plan, engine, sizes),),
                                     salt=seed * 1000 + 999))
    cap_cpu = _cpu_shares(cpu0, _cpu(opts), time.monotonic() - wall0)
    if cap_result.error:
        if not _few_errors(cap_result):
            raise RuntimeError(f"the capacity run failed: {cap_result.error}")
        tell(f"warning: the capacity run: {cap_result.error}; kept (at most {CAPACITY_ERRORS:.0%} of its "
             "requests failed, counted as not completed)")
    cap = capacity(cap_result)
    prev = probe()
    cap_cal = calibrate([before, prev], comp, engine, source([before, prev]))
    overload = generate(opts.workload, n=OVERLOAD_REQUESTS, rate=OVERLOAD * cap, seed=seed + 2)
    cap_stats: dict[str, float] = {}
    sim_cap = summarize(simulate_engine(model, engine, cap_cal.step, overload, cap_cal.frontend_s,
                                        stats=cap_stats, queue=cap_cal.frontend,
                                        cold=cap_cal.cold))["throughput_rps"]
    tell(f"capacity {cap:.2f} req/s measured, {sim_cap or 0:.2f} simulated")
    if cap_cpu:
        tell("  capacity run, busy cores: " + ", ".join(f"{k} {v:.2f}" for k, v in cap_cpu.items()))
    loads, details = [], []
    priorities = {rt.name: rt.priority for rt in model.request_types if rt.priority is not None}
    for i, frac in enumerate(opts.loads):
        rate = frac * cap
        requests = generate(opts.workload, duration_s=opts.duration_s, rate=rate, seed=seed + 10 + i)
        if not requests:
            raise ValueError(f"no request arrives in {opts.duration_s} s at {rate:.3g} req/s; "
                             "lengthen --duration")
        tell(f"load {frac:.0%}: {rate:.2f} req/s, {len(requests)} requests, "
             f"{opts.repeats} replay(s), each between two probes")
        load = LoadOptions(engine.url, api="completions", model=engine.model, component=comp, vocab=vocab,
                           priorities=priorities, drain_s=opts.drain_s)
        around, runs = [prev], []
        for k in range(opts.repeats):
            run_load = replace(load, run_id=f"fidelity{seed}-{i}-{k}-")
            runs.append(_replay(requests, run_load, lambda: _cpu(opts)))
            prev = probe()
            around.append(prev)
        cal = calibrate(around, comp, engine, source(around))
        sim_its: dict[str, float] = {}
        predicted = simulate_engine(model, engine, cal.step, requests, cal.frontend_s, cal.delivery, sim_its,
                                    queue=cal.frontend, cold=cal.cold)
        simulated = summarize(predicted)
        measured = _median_metrics([m for m, _ in runs])
        hold = cal.to_json()["holdout"]
        drift = cal.drift if cal.drift is not None else math.nan
        dl = cal.delivery
        tell(f"  step model held-out error median {hold['median'] or 0:.1%}, probe drift {drift:.1%}, front "
             f"end {cal.frontend_s * 1e3:.1f} ms, delivery {dl.base_s * 1e3:.2f} + "
             f"{dl.per_stream_s * 1e3:.3f} x streams ms/token")
        loads.append({"offered_rps": rate, "measured": measured, "simulated": simulated})
        # where the mean TTFT goes, per replay (measured) against the simulator (a report only)
        decomposition = [ttft_decomposition(d["ttft_mean_ms"], d["server_ms"], mean_ttft_ms(predicted),
                                            cal.frontend_s * 1e3) for _, d in runs]
        details.append({"fraction": frac, "requests": len(requests),
                        **{k: v for k, v in runs[0][1].items() if k != "summary"},
                        "calibration": cal.to_json(), "ttft_decomposition_ms": decomposition,
                        "simulated_iterations": sim_its,
                        "repeats": [d for _, d in runs]})
    if opts.table is not None:
        opts.table.parent.mkdir(parents=True, exist_ok=True)
        ProfileSet(mean_rows([r for p in probes for r in p.rows], source(probes))).save(opts.table)
    doc_engine = {
        **engine.to_json(),
        "warnings": engine.check_supported(),
        "workload": opts.workload.spec.name,
        "component": comp,
        "seed": seed,
        "duration_s": opts.duration_s,
        "repeats": opts.repeats,
        "capacity_measured_rps": cap,
        "capacity_simulated_rps": sim_cap,
        "capacity_source": (f"measured: closed loop of {cap_result.points[0].concurrency} workers with the "
                            "workload's sizes, steady-state window; simulated: the simulator fed "
                            f"{OVERLOAD:g}x that rate ({OVERLOAD_REQUESTS} requests) on the step model of "
                            "the probes around the capacity run"),
        "capacity_point": cap_result.points[0].to_json(),
        "capacity_errors": cap_result.error or None,
        # CPU busy share (cores) of each part over the capacity run: which one bound it (a report)
        "capacity_cpu_cores": cap_cpu or None,
        # the simulator's side of the capacity run: its front end's busy share, fixed-point rounds
        "capacity_simulated_stats": cap_stats,
        "calibration": CALIBRATION,
        "frontend_ms": cap_cal.frontend_s * 1e3,
        "step_model": cap_cal.step.to_json(),
        "capacity_calibration": cap_cal.to_json(),
        "profile": {"table": str(opts.table) if opts.table else None,
                    "probes": [p.to_json() for p in probes]},
        "loads": details,
        "wall_s": time.monotonic() - t0,
        "machine_load": _machine_load(),
    }
    return {"engine": doc_engine, "loads": loads}
