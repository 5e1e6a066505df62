"""The simulator's side of the fidelity loop: the live engine as one simulated LLM executor
(its own limits, the step model fitted to its probes) behind the front end the probes measured
(a constant, or the CPU queue of :mod:`omniplane.fidelity.frontend`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np

from omniplane.fidelity.calibrate import Delivery, decode_streams
from omniplane.fidelity.compare import Timing
from omniplane.fidelity.engine import EngineConfig
from omniplane.fidelity.frontend import FrontEnd, Run, fixed_point
from omniplane.fidelity.idle import ColdStart, idle_before
from omniplane.perf.steptime import StepModel
from omniplane.sim import RunSetup, SimResult, SimRun
from omniplane.spec import ExecutorGroup, ModelSpec, PlanNode, PlanSpec, Route
from omniplane.workload import Request


def component_of(model: ModelSpec, name: str) -> str:
    """The LLM the requests exercise: ``name``, else the model's only LLM."""
    llms = [c.name for c in model.components if c.is_llm]
    if name:
        if name not in llms:
            raise ValueError(f"--component {name!r}: not an LLM of model {model.name} (LLMs: {llms})")
        return name
    if len(llms) != 1:
        raise ValueError(f"model {model.name} has {len(llms)} LLMs ({llms}); name one with --component")
    return llms[0]


def engine_plan(model: ModelSpec, engine: EngineConfig) -> PlanSpec:
    """One executor hosting the model's LLM, batch as the engine's ``max_num_seqs``."""
    comp = component_of(model, "")
    return PlanSpec(
        name=f"{model.name}-live-engine", model=model.name, gpu="host", transfer_ms=0.0,
        nodes=[PlanNode(name=comp, components=[comp],
                        executors=[ExecutorGroup(count=1, tp=1, max_batch=engine.max_num_seqs)])],
        routes={t: [Route(nodes=[comp], p=1.0)] for t in model.type_names},
    )


class _Counted:
    """The step model, counting the iterations the simulator prices one by one (those with a
    prompt chunk: a decode-only run of iterations is priced as a span)."""

    def __init__(self, step: StepModel) -> None:
        self._step = step
        self.prefill_only = self.mixed = 0
        self.prefill_tokens = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._step, name)

    def llm_iteration_time(self, component: str, cfg: Any, **work: int) -> float:
        if work.get("prefill_tokens", 0) > 0:
            self.prefill_tokens += work["prefill_tokens"]
            if work.get("decode_batch", 0) > 0:
                self.mixed += 1
            else:
                self.prefill_only += 1
        return self._step.llm_iteration_time(component, cfg, **work)


def simulate_engine(model: ModelSpec, engine: EngineConfig, step: StepModel, requests: Sequence[Request],
                    frontend_s: float, delivery: Delivery | None = None,
                    stats: dict[str, float] | None = None, queue: FrontEnd | None = None,
                    cold: ColdStart | None = None) -> list[Timing]:
    """The simulator's prediction for ``requests`` on the engine (its limits, its step model),
    with the front-end latency added to every first token and finish and, given a delivery
    cost, ``(tokens - 1) delivery.per_token(b)`` to every finish (``b``: the mean number of
    simulated requests decoding while it decodes). Given a front-end ``queue``
    (:mod:`omniplane.fidelity.frontend`), its latency replaces ``frontend_s`` and every request's
    admission and tokens wait for the shared front-end core, the engine and the queue simulated
    to a fixed point. ``stats`` receives what the simulated engine ran: iterations, of which
    mixed and prefill-only, and scheduled tokens per iteration (the counterpart of the replay's
    ``engine_iterations``), and with a queue its busy share and fixed-point rounds. Given a
    ``cold`` start cost (:mod:`omniplane.fidelity.idle`), a request that reaches the engine while
    it is idle pays it, by how long the engine had been idle, on its first token and finish."""
    comp = step.component
    reqs = sorted(requests, key=lambda r: r.arrival)
    arrival = np.array([r.arrival for r in reqs], float)
    prompt = np.array([float(r.work[comp]["prompt_tokens"]) for r in reqs])
    tokens = np.array([int(r.work[comp]["output_tokens"]) for r in reqs])
    sim_stats: dict[str, float] = {}
    busy: list[tuple[np.ndarray, np.ndarray]] = []  # the last run's step intervals

    def run(at: np.ndarray) -> Run:
        shifted = [replace(r, arrival=float(t)) for r, t in zip(reqs, at, strict=True)]
        return _simulate(model, engine, step, shifted, sim_stats, busy)

    if queue is not None and queue.queued:
        first, finish, served, fp = fixed_point(queue, arrival, prompt, tokens, run, _streams)
        front = queue.latency_s
        extra_first, extra_last = served.first, served.last
        sim_stats.update({"frontend_busy": served.busy_s / served.span_s if served.span_s > 0 else 0.0, **fp,
                          "frontend_admit_wait_mean_ms": float(np.nanmean(served.admit)) * 1e3})
        at_engine = arrival + served.admit
    else:
        first, finish, _ = run(arrival)
        at_engine = arrival
        front = queue.latency_s if queue is not None else frontend_s
        extra_first = np.zeros(len(reqs))
        extra_last = np.zeros(len(reqs))
        if delivery is not None and len(reqs):
            ok = np.isfinite(first) & np.isfinite(finish)
            streams = np.ones(len(reqs))
            streams[ok] = _streams(first[ok], finish[ok])
            extra_last = np.maximum(0, tokens - 1) * np.array([delivery.per_token(b) for b in streams])
    if cold is not None and len(reqs) and busy:
        idle = idle_before(*busy[-1], at_engine)
        extra = cold.cost(idle)  # never ran before (inf): the largest idle's cost
        extra_first, extra_last = extra_first + extra, extra_last + extra
        sim_stats.update({"idle_arrivals": float(np.mean(idle > 0)),
                          "cold_mean_ms": float(np.mean(extra)) * 1e3})
    if stats is not None:
        stats.update(sim_stats)
    rows = zip(arrival, first + extra_first, finish + extra_last, tokens, strict=True)
    return [Timing(float(a), float(f + front), float(e + front), int(t))
            for a, f, e, t in rows if math.isfinite(f) and math.isfinite(e)]


def _streams(first: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """:func:`decode_streams` over the requests that finished (1 for the others)."""
    out = np.ones(len(first))
    ok = np.isfinite(first) & np.isfinite(finish)
    if ok.any():
        out[ok] = decode_streams(first[ok], finish[ok])
    return out


def _simulate(model: ModelSpec, engine: EngineConfig, step: StepModel, requests: Sequence[Request],
              stats: dict[str, float], busy: list[tuple[np.ndarray, np.ndarray]] | None = None) -> Run:
    """One simulation of the engine alone: per request (in the order given) its first token
    and finish in simulated seconds (inf for a request that failed or never finished), and the
    engine's iteration ends (:func:`iteration_ends`); ``busy`` receives its steps' start and end
    times."""
    limits = step.limits
    # a measured engine has no GPU kind: its config is the engine's own limits (make_cfg)
    setup = RunSetup(make_cfg=lambda _gpu, _tp, _batch: limits, token_budget=engine.max_num_batched_tokens,
                     trace=True)
    counted = _Counted(step)
    sim = SimRun(model, engine_plan(model, engine), None, cast(StepModel, counted), setup)
    result = sim.run(requests)
    topo = sim.topology
    rec = result.requests
    llm = [e for ex in topo.executors for e in ex.engines if hasattr(e, "iters")]
    decode_its = sum(int(getattr(e, "iters", 0)) for e in llm)  # decode iterations, mixed included
    its = decode_its + counted.prefill_only
    # as vLLM's vllm:iteration_tokens_total counts them: computed prompt tokens plus every
    # generated token (the first one included)
    generated = sum(int(r.work[step.component]["output_tokens"]) for r in requests)
    stats.update({"iterations": its, "mixed": counted.mixed, "prefill_only": counted.prefill_only,
                  "tokens_per_iteration": (counted.prefill_tokens + generated) / its if its else 0.0})
    index = {r.id: i for i, r in enumerate(requests)}
    first = np.full(len(requests), math.inf)
    finish = np.full(len(requests), math.inf)
    for rid, f, e, failed in zip(rec.rid, rec.first_response, rec.finish, rec.failed, strict=True):
        if not failed and math.isfinite(f) and math.isfinite(e):
            first[index[int(rid)]], finish[index[int(rid)]] = float(f), float(e)
    if busy is not None:
        spans = np.array([(start, end) for ex in result.trace for start, end, *_ in ex.steps], float)
        busy[:] = [(spans[:, 0], spans[:, 1])] if len(spans) else [(np.zeros(0), np.zeros(0))]
    return first, finish, iteration_ends(result)


def iteration_ends(result: SimResult) -> np.ndarray:
    """The end of every engine iteration of a traced run, sorted: a step's end, and a decode span
    of ``n`` iterations split evenly over its duration (its iterations take nearly equal times,
    the context growing by one token each: an approximation)."""
    ends = [start + (end - start) * np.arange(1, n + 1) / n
            for ex in result.trace for start, end, _comp, _kind, _batch, n in ex.steps if n > 0]
    return np.sort(np.concatenate(ends)) if ends else np.zeros(0)
