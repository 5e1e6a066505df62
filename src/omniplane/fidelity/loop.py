"""The fidelity loop: profile a live engine, fit its step model, simulate a workload on it,
replay the same workload against the engine, and put predicted next to measured.

1. **Engine config** from the engine itself (:mod:`omniplane.fidelity.engine`): max batch,
   token budget, KV blocks; the simulator's LLM engine is configured with exactly these.
2. **Profile** (``omniplane.perf.profiler``, Cornfigurator 5.1): prefill rows at concurrency 1
   (the engine's own prefill time, queueing excluded), decode rows from synchronized bursts at
   several batch sizes and two context lengths, and the **capacity**: the request throughput
   of a closed loop of ``max_num_seqs`` workers sending the workload's own sizes, in its
   steady-state window (the engine at its largest batch).
3. **Environment calibration** from the profile only, never from the loads compared below:
   the step model's coefficients (:mod:`omniplane.perf.steptime`, fitted to every row at once)
   and the front-end latency (client TTFT minus the engine's queueing and prefill at
   concurrency 1, median over the prefill points), added to every simulated TTFT and E2E.
4. For each load (a fraction of the measured capacity): the workload's requests at that rate
   (seeded), simulated and replayed open loop with ``omniplane loadgen`` (completions API,
   token-id prompts); both summarised by :mod:`omniplane.fidelity.compare`.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import httpx
import numpy as np

from omniplane.fidelity.compare import Timing, measured_timings, summarize
from omniplane.fidelity.engine import EngineConfig, read_engine_config
from omniplane.loadgen.client import LoadOptions, replay
from omniplane.loadgen.metrics import COMPLETED
from omniplane.perf import ProfileSet
from omniplane.perf.profiler import ProfileRun, RequestSpec, SweepResult, run_profile
from omniplane.perf.profiler.client import server_means, server_totals
from omniplane.perf.steptime import StepModel, fit_step_model
from omniplane.sim import EventLoop, RunSetup, Simulation, build_topology
from omniplane.spec import ExecutorGroup, GPUKind, ModelSpec, PlanNode, PlanSpec, ResolvedWorkload, Route
from omniplane.workload import Request, generate

Say = Callable[[str], None]
OVERLOAD = 3.0  # the simulated capacity: the simulator fed this many times the measured capacity
OVERLOAD_REQUESTS = 600


@dataclass(frozen=True)
class ProfilePlan:
    """What the profile measures (defaults: the benchmark; :meth:`quick`: the tests)."""

    prefill_sizes: tuple[int, ...] = (16, 64, 256, 1024)
    decode_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    long_context: int = 1024
    long_batches: tuple[int, ...] = (1, 8, 32)
    decode_tokens: int = 64
    rounds: int = 3  # bursts per decode point
    capacity_s: float = 30.0  # the closed loop at the largest batch runs this long
    prefill_rounds: int = 6  # requests per prefill point (concurrency 1)
    capacity_concurrency: int = 0  # workers of the capacity point (0: the engine's max_num_seqs)

    @classmethod
    def quick(cls) -> ProfilePlan:
        """A short profile for tests: its capacity is at 16 workers, not the largest batch."""
        return cls((32, 256), (1, 4, 16), 512, (1, 4), 16, 2, 6.0, 3, 16)


@dataclass(frozen=True)
class FidelityOptions:
    url: str
    workload: ResolvedWorkload
    loads: tuple[float, ...] = (0.3, 0.6, 0.9)
    duration_s: float = 60.0
    seed: int | None = None
    component: str = ""  # the LLM the requests exercise (default: the model's only LLM)
    plan: ProfilePlan = field(default_factory=ProfilePlan)
    given: dict[str, int] = field(default_factory=dict)  # engine settings it does not report
    table: Path | None = None  # where to write the profile table (CSV)
    gpu: str = "cpu"  # the table's gpu column: the engine's hardware, as a label
    drain_s: float = 120.0
    repeats: int = 1  # replays of each load (the same requests); measured = the median of each metric


def _component(model: ModelSpec, name: str) -> str:
    llms = [c.name for c in model.components if c.is_llm]
    if name:
        if name not in llms:
            raise ValueError(f"--component {name!r}: not an LLM of model {model.name} (LLMs: {llms})")
        return name
    if len(llms) != 1:
        raise ValueError(f"model {model.name} has {len(llms)} LLMs ({llms}); name one with --component")
    return llms[0]


def profile_specs(plan: ProfilePlan, engine: EngineConfig, sizes: Sequence[tuple[int, int]],
                  typical_prompt: int) -> tuple[tuple[RequestSpec, ...], RequestSpec]:
    """The profile's request specs for this engine and workload, and the capacity point's
    (module docstring)."""
    room = engine.max_model_len - plan.decode_tokens - 1
    batches = tuple(b for b in plan.decode_batches if b <= engine.max_num_seqs)
    specs = [RequestSpec(f"prefill-{p}", p, 1, concurrency=(1,), rounds=plan.prefill_rounds)
             for p in plan.prefill_sizes if p <= min(room, engine.max_num_batched_tokens)]
    specs.append(RequestSpec(f"decode-{typical_prompt}", typical_prompt, plan.decode_tokens,
                             concurrency=batches, burst=True))
    if plan.long_context <= room:
        long = tuple(b for b in plan.long_batches if b <= engine.max_num_seqs)
        specs.append(RequestSpec(f"decode-{plan.long_context}", plan.long_context, plan.decode_tokens,
                                 concurrency=long, burst=True))
    workers = min(plan.capacity_concurrency or engine.max_num_seqs, engine.max_num_seqs)
    cap = RequestSpec("capacity", sizes[0][0], sizes[0][1], concurrency=(workers,),
                      sizes=tuple(sizes), duration_s=plan.capacity_s)
    return tuple(specs), cap


def _sizes(requests: Sequence[Request], comp: str) -> list[tuple[int, int]]:
    return [(int(r.work[comp]["prompt_tokens"]), int(r.work[comp]["output_tokens"])) for r in requests]


def engine_plan(model: ModelSpec, engine: EngineConfig) -> PlanSpec:
    """One executor hosting the model's LLM, batch as the engine's ``max_num_seqs``."""
    comp = _component(model, "")
    return PlanSpec(
        name=f"{model.name}-live-engine", model=model.name, gpu="host", transfer_ms=0.0,
        nodes=[PlanNode(name=comp, components=[comp],
                        executors=[ExecutorGroup(count=1, tp=1, max_batch=engine.max_num_seqs)])],
        routes={t: [Route(nodes=[comp], p=1.0)] for t in model.type_names},
    )


def simulate_engine(model: ModelSpec, engine: EngineConfig, step: StepModel, requests: Sequence[Request],
                    frontend_s: float) -> list[Timing]:
    """The simulator's prediction for ``requests`` on the engine (its limits, its step model),
    with the front-end latency added to every first token and finish."""
    loop = EventLoop()
    limits = step.limits
    # a measured engine has no GPU kind: its config is the engine's own limits (make_cfg), and
    # build_topology only hands the GPU kind to make_cfg
    setup = RunSetup(make_cfg=lambda _gpu, _tp, _batch: limits, token_budget=engine.max_num_batched_tokens)
    topo = build_topology(model, engine_plan(model, engine), cast(GPUKind, None), step, loop, setup)
    rec = Simulation(model, topo, requests, loop=loop).run().requests
    comp = step.component
    tokens = {r.id: int(r.work[comp]["output_tokens"]) for r in requests}
    out = []
    for rid, arrival, first, finish, failed in zip(rec.rid, rec.arrival, rec.first_response, rec.finish,
                                                    rec.failed, strict=True):
        if failed or not (math.isfinite(first) and math.isfinite(finish)):
            continue
        out.append(Timing(float(arrival), float(first) + frontend_s, float(finish) + frontend_s,
                          tokens[int(rid)]))
    return out


def frontend_latency(result: SweepResult) -> float:
    """Median over the concurrency-1 prefill points of client TTFT minus the engine's queueing
    and prefill (0 when the engine reports neither)."""
    xs = [p.frontend_s for p in result.points
          if p.concurrency == 1 and p.request.startswith("prefill-") and p.frontend_s is not None]
    return max(0.0, statistics.median(xs)) if xs else 0.0


def capacity(result: SweepResult) -> float:
    rates = [p.request_throughput for p in result.points if p.request == "capacity" and p.n_window > 0]
    if not rates:
        raise RuntimeError("the capacity point measured nothing in its steady-state window "
                           f"({result.error or 'no requests completed'})")
    return max(rates)


def _replay(requests: Sequence[Request], load: LoadOptions) -> tuple[dict[str, float | None], dict[str, Any]]:
    """One open-loop replay: its summary and what happened (counts, the engine's own means)."""
    before = asyncio.run(_server_totals(load.url))
    records = asyncio.run(replay(requests, load))
    server = server_means(before, asyncio.run(_server_totals(load.url)))
    summary = summarize(measured_timings(records))
    late = sorted(r.start - r.arrival for r in records)
    return summary, {
        # how late the load generator sent requests: a busy machine stalls the client too, and
        # a run whose sends were late measured the machine as much as the engine
        "send_late_ms": {"p50": 1e3 * late[len(late) // 2], "p99": 1e3 * late[int(0.99 * (len(late) - 1))],
                         "max": 1e3 * late[-1]} if late else {},
        "completed": sum(r.status == COMPLETED for r in records),
        "lost": sum(r.status == "lost" for r in records),
        "failed": sum(r.status in ("failed", "shed") for r in records),
        "errors": sorted({r.error for r in records if r.error})[:5],
        # the engine's own means over the replay (vLLM's histograms): where the time went
        "server_ms": {k: v * 1e3 for k, v in server.items()},
        "summary": summary,
    }


def _median_metrics(runs: Sequence[dict[str, float | None]]) -> dict[str, float | None]:
    """Per metric, the median over repeated replays of one load (the run itself when one)."""
    out: dict[str, float | None] = {}
    for k in runs[0]:
        vals = [v for r in runs if (v := r[k]) is not None]
        out[k] = float(statistics.median(vals)) if vals else None
    return out


async def _server_totals(url: str) -> dict[str, tuple[float, float]] | None:
    async with httpx.AsyncClient(timeout=10.0) as client:
        return await server_totals(client, url)


def _machine_load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_fidelity(opts: FidelityOptions, say: Say | None = None) -> dict[str, Any]:
    """The whole loop (module docstring); returns the ``out/fidelity.json`` document."""
    tell = say or (lambda _msg: None)
    model = opts.workload.model
    comp = _component(model, opts.component)
    vocab = model.component(comp).size.vocab
    if vocab is None:
        raise ValueError(f"model {model.name}: component {comp} has no size.vocab "
                         "(token-id prompts need it)")
    engine = read_engine_config(opts.url, opts.given)
    tell(f"engine: max_num_seqs {engine.max_num_seqs}, max_num_batched_tokens "
         f"{engine.max_num_batched_tokens}, KV {engine.kv_tokens} tokens "
         f"(from {engine.sources.get('max_num_seqs')})")
    seed = opts.workload.spec.seed if opts.seed is None else opts.seed
    mix = generate(opts.workload, n=256, seed=seed + 1)
    sizes = _sizes(mix, comp)
    typical = int(np.median([p for p, _ in sizes]))
    specs, cap_spec = profile_specs(opts.plan, engine, sizes, typical)
    run = ProfileRun(engine.url, engine.model, comp, opts.gpu, 1, specs, requests_per_worker=opts.plan.rounds,
                     api="completions", vocab=vocab, salt=seed)
    tell(f"profiling ({sum(sum(run.levels(s)) * run.rounds(s) for s in run.requests)} requests), "
         f"then the capacity at concurrency {cap_spec.concurrency[0]}")
    result = run_profile(run)
    cap_result = run_profile(replace(run, requests=(cap_spec,)))
    result.points.extend(cap_result.points)
    if result.error or cap_result.error:
        raise RuntimeError(f"profiling failed: {result.error or cap_result.error}")
    table = ProfileSet(result.rows)
    if opts.table is not None:
        opts.table.parent.mkdir(parents=True, exist_ok=True)
        table.save(opts.table)
    step = fit_step_model(result.rows, comp, engine.limits(),
                          source=f"measured: omniplane fidelity profile of {engine.url}")
    frontend = frontend_latency(result)
    cap = capacity(result)
    overload = generate(opts.workload, n=OVERLOAD_REQUESTS, rate=OVERLOAD * cap, seed=seed + 2)
    sim_cap = summarize(simulate_engine(model, engine, step, overload, frontend))["throughput_rps"]
    tell(f"capacity {cap:.2f} req/s measured, {sim_cap or 0:.2f} simulated; front end "
         f"{frontend * 1e3:.1f} ms; step model median fit error "
         f"{step.fit_errors().get('median', math.nan):.1%}")
    loads, details = [], []
    priorities = {rt.name: rt.priority for rt in model.request_types if rt.priority is not None}
    for i, frac in enumerate(opts.loads):
        rate = frac * cap
        requests = generate(opts.workload, duration_s=opts.duration_s, rate=rate, seed=seed + 10 + i)
        if not requests:
            raise ValueError(f"no request arrives in {opts.duration_s} s at {rate:.3g} req/s; "
                             "lengthen --duration")
        simulated = summarize(simulate_engine(model, engine, step, requests, frontend))
        tell(f"load {frac:.0%}: {rate:.2f} req/s, {len(requests)} requests, replaying"
             + (f" {opts.repeats} times" if opts.repeats > 1 else ""))
        load = LoadOptions(engine.url, api="completions", model=engine.model, component=comp, vocab=vocab,
                           priorities=priorities, drain_s=opts.drain_s)
        runs = [_replay(requests, replace(load, run_id=f"fidelity{seed}-{i}-{k}-"))
                for k in range(opts.repeats)]
        measured = _median_metrics([m for m, _ in runs])
        loads.append({"offered_rps": rate, "measured": measured, "simulated": simulated})
        details.append({"fraction": frac, "requests": len(requests),
                        **{k: v for k, v in runs[0][1].items() if k != "summary"},
                        "repeats": [d for _, d in runs]})
    doc_engine = {
        **engine.to_json(),
        "warnings": engine.check_supported(),
        "workload": opts.workload.spec.name,
        "component": comp,
        "seed": seed,
        "duration_s": opts.duration_s,
        "capacity_measured_rps": cap,
        "capacity_simulated_rps": sim_cap,
        "capacity_source": (f"measured: closed loop of {cap_spec.concurrency[0]} workers with the workload's "
                            "sizes, steady-state window; simulated: the simulator fed "
                            f"{OVERLOAD:g}x that rate ({OVERLOAD_REQUESTS} requests)"),
        "frontend_ms": frontend * 1e3,
        "frontend_source": ("measured: median over the concurrency-1 prefill points of client TTFT minus "
                            "the engine's queue and prefill time; added to simulated TTFT and E2E"),
        "step_model": step.to_json(),
        "profile": {"table": str(opts.table) if opts.table else None, "rows": len(result.rows),
                    "points": [p.to_json() for p in result.points]},
        "loads": details,
        "machine_load": _machine_load(),
    }
    return {"engine": doc_engine, "loads": loads}
