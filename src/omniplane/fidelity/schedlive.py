"""HorizonServe on a live vLLM engine: the same mixed stream replayed against vLLM's own
scheduler (``bare``) and omniplane's scheduler class (``--scheduler-cls``) running ``fcfs`` and
``horizon``, each on a freshly started engine serving the tiny fixture.

Request classes travel as vLLM request priorities (the model spec's ``priority`` per type: text
0, long 10), which omniplane's scheduler class maps to its classes (an inline SLO table: each
type's path class and SLO). The engine's own scheduling policy stays ``fcfs`` (docs/reference/vllm.md:
vLLM ignores the priority value then). Measured per class: TTFT p50/p95 and SLO attainment
(TTFT within the class's SLO); per run: throughput three ways (:mod:`omniplane.fidelity.throughput`:
over the span to the last completion, over the arrival window, output tokens in its steady
middle), the engine's own mean queue / prefill / TTFT (vLLM's histograms: where the first-token
time went), and that every request completed exactly once (each client record completed with
all its tokens, and the engine's own ``vllm:request_success_total`` grew by exactly the number
sent). One engine start can replay several streams in turn (e.g. two rates). Optionally each
engine's capacity (closed loop at ``max_num_seqs``, the profiler's steady-state window) gives
the wrapper's throughput cost at saturation.

No GPU here: the spatial controller has nothing to throttle (no SM ladder, ``total_sms`` 0);
the temporal side (N:M rotation, slack guard, long-path admission cap) is what runs.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from omniplane.fidelity.compare import measured_timings, summarize
from omniplane.fidelity.engine import read_engine_config
from omniplane.fidelity.server import ServerSpec, VllmServer
from omniplane.fidelity.throughput import NOTE, TRIM, throughput
from omniplane.loadgen.affinity import isolate_engine
from omniplane.loadgen.client import LoadOptions, replay
from omniplane.loadgen.metrics import COMPLETED, Record, send_lateness
from omniplane.loadgen.metrics import summarize as loadgen_summary
from omniplane.perf.profiler import ProfileRun, RequestSpec, run_profile
from omniplane.perf.profiler.client import server_means, server_totals_at
from omniplane.slo.resolve import explicit_targets
from omniplane.spec import ExplicitSLO, ModelSpec, ResolvedWorkload
from omniplane.vllm.settings import load_settings
from omniplane.workload import Request, generate

SCHEDULER_CLS = "omniplane.vllm.scheduler.OmniplaneScheduler"
POLICIES = ("bare", "fcfs", "horizon")
# also accepted: omniplane's `priority` baseline (vLLM's priority order by request class, the policy
# vLLM ships as --scheduling-policy priority, run through the same wrapper)
LIVE_POLICIES = (*POLICIES, "priority")
WARMUP = 4  # requests sent (and awaited) after start-up, before the measured stream


def slo_table(model: ModelSpec, slo_s: Mapping[str, float], long_types: Sequence[str],
              source: str) -> dict[str, Any]:
    """The scheduler's class table: one class per request type, by its priority; ``long_types``
    are on the long path (they continue past the shared stage in a real omni deployment)."""
    classes = {}
    for rt in model.request_types:
        if rt.priority is None:
            raise ValueError(f"request type {rt.name} of {model.name} has no priority to carry its class")
        path = "long" if rt.name in long_types else "short"
        classes[rt.name] = {"priority": rt.priority, "path": path, "slo_s": slo_s.get(rt.name)}
    return {"kind": "omniplane-slo-table", "source": source, "classes": classes}


def class_table(wl: ResolvedWorkload, long_types: Sequence[str]) -> tuple[dict[str, float], dict[str, Any]]:
    """The workload's explicit SLOs (seconds) and the scheduler's class table built from them."""
    if not isinstance(wl.spec.slo, ExplicitSLO):
        raise ValueError(f"workload {wl.spec.name}: the live comparison needs explicit SLO targets "
                         "(slo: {policy: explicit, targets_ms: ...})")
    slo_s = explicit_targets(wl.spec.slo, wl.model.type_names).seconds
    return slo_s, slo_table(wl.model, slo_s, long_types, f"assumption: the explicit targets of workload "
                                                          f"{wl.spec.name}")


def scheduler_args(policy: str, table: Mapping[str, Any], options: Mapping[str, Any] | None = None,
                   control_dir: Path | None = None) -> tuple[str | None, dict[str, Any] | None]:
    """``(scheduler_cls, additional_config)`` of one policy (``bare``: vLLM's own scheduler).
    With ``control_dir`` the scheduler publishes every step in a control record there
    (``omniplane-live-<policy>``, slot 0: its pid, step count, requests active)."""
    if policy not in LIVE_POLICIES:
        raise ValueError(f"unknown policy {policy!r} (expected one of {', '.join(LIVE_POLICIES)})")
    if policy == "bare":
        return None, None
    settings: dict[str, Any] = {
        "policy": policy,
        "slo_table": dict(table),
        "default_class": next(iter(table["classes"])),
        "class_source": "priority",
        "sampler": "null",
        "streams": "null",
    }
    if policy == "horizon" and options:
        settings["policy_options"] = dict(options)
    if control_dir is not None:
        settings.update(control=f"live-{policy}", control_dir=str(control_dir))
    return SCHEDULER_CLS, {"omniplane": settings}


@dataclass(frozen=True)
class LiveSchedOptions:
    model_dir: str
    workload: ResolvedWorkload
    rate: float
    duration_s: float = 60.0
    extra_rates: tuple[float, ...] = ()  # further streams replayed on the same engines, after ``rate``'s
    seed: int | None = None
    policies: tuple[str, ...] = POLICIES
    long_types: tuple[str, ...] = ("long",)  # request types on the long path (HorizonServe 4.1)
    policy_options: dict[str, Any] = field(default_factory=dict)
    capacity_s: float = 0.0  # > 0: also each engine's closed-loop capacity (that long a window)
    # the engine-core process's niceness once the client is pinned, as `omniplane fidelity --fixture`
    # (docs/decisions/0107-engine-core-renice.md: its yield-spinning loop starves the load
    # generator); 0: leave it
    nice_engine_core: int = 19
    python: str = ""
    log_dir: Path | None = None
    drain_s: float = 120.0


async def _success_total(url: str) -> float | None:
    async with httpx.AsyncClient(timeout=10.0) as client:
        try:
            resp = await client.get(f"{url}/metrics")
        except httpx.HTTPError:
            return None
    total, found = 0.0, False
    for line in resp.text.splitlines():
        if line.startswith("vllm:request_success_total"):
            total += float(line.rsplit(" ", 1)[-1])
            found = True
    return total if found else None


def exactly_once(requests: Sequence[Request], records: Sequence[Record], comp: str,
                 server_delta: float | None) -> dict[str, Any]:
    """Every request completed once with all its tokens; the engine finished exactly as many."""
    by_id: dict[int, int] = {}
    for r in records:
        by_id[r.id] = by_id.get(r.id, 0) + (r.status == COMPLETED)
    want = {r.id: int(r.work[comp]["output_tokens"]) for r in requests}
    short = sorted(r.id for r in records if r.status == COMPLETED and r.output_tokens != want[r.id])
    missing = sorted(i for i in want if by_id.get(i, 0) == 0)
    repeated = sorted(i for i, n in by_id.items() if n > 1)
    return {
        "sent": len(requests),
        "completed": sum(by_id.values()),
        "missing": missing[:20],
        "repeated": repeated[:20],
        "short_outputs": short[:20],
        "engine_finished": server_delta,
        "ok": not missing and not repeated and not short and server_delta == len(requests),
    }


def _per_class(records: Sequence[Record], slo_s: Mapping[str, float]) -> dict[str, Any]:
    m = loadgen_summary(records, slo_s)
    out = {}
    for t, v in m["per_type"].items():
        out[t] = {k: v[k] for k in ("sent", "completed", "lost", "unfinished", "failed", "slo_ms",
                                    "attainment", "p50_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "p50_e2el_ms")}
    return out


def server_spec(policy: str, opts: LiveSchedOptions, table: Mapping[str, Any]) -> ServerSpec:
    """The engine one policy runs on (its settings validated here, not a minute into start-up)."""
    cls, extra = scheduler_args(policy, table, opts.policy_options, opts.log_dir)
    if extra is not None:
        load_settings(extra, {})
    log = opts.log_dir / f"vllm-{policy}.log" if opts.log_dir else None
    python = opts.python or sys.executable
    return ServerSpec(opts.model_dir, served_name=opts.workload.model.name, python=python,
                      scheduler_cls=cls, additional_config=extra, log=log)


def measure_stream(url: str, model: ModelSpec, requests: Sequence[Request], slo_s: Mapping[str, float],
                   drain_s: float = 120.0) -> dict[str, Any]:
    """Warm the engine up, replay ``requests`` open loop, and measure them (module docstring)."""
    comp = next(c.name for c in model.components if c.is_llm)
    vocab = int(model.component(comp).size.vocab or 0)
    priorities = {rt.name: rt.priority for rt in model.request_types if rt.priority is not None}
    load = LoadOptions(url, api="completions", model=model.name, component=comp, vocab=vocab,
                       priorities=priorities, drain_s=drain_s)
    warm = [Request(i, 0.05 * i, r.type, r.work) for i, r in enumerate(requests[:WARMUP])]
    asyncio.run(replay(warm, replace(load, run_id="warmup-")))
    before, hist0 = asyncio.run(_success_total(url)), asyncio.run(server_totals_at(url))
    records = asyncio.run(replay(requests, replace(load, run_id="stream-")))
    after, hist1 = asyncio.run(_success_total(url)), asyncio.run(server_totals_at(url))
    delta = after - before if after is not None and before is not None else None
    timings = measured_timings(records)
    return {
        "exactly_once": exactly_once(requests, records, comp, delta),
        "per_class": _per_class(records, slo_s),
        "overall": summarize(timings),
        "throughput": {**throughput(timings, [r.start for r in records]), "trim": TRIM,
                       "note": NOTE.format(trim=TRIM)},
        # the engine's own means over the stream (all classes): queue = arrival in the engine
        # core to first scheduled, prefill = first scheduled to first token, ttft = from the API
        # server's arrival; read for the report only
        "server_ms": {k: v * 1e3 for k, v in server_means(hist0, hist1).items()},
        "send_late_ms": send_lateness(records),
    }


def engine_capacity(url: str, model: ModelSpec, requests: Sequence[Request],
                    window_s: float) -> dict[str, Any]:
    """Closed loop of ``max_num_seqs`` workers with the stream's sizes (steady-state window)."""
    comp = next(c.name for c in model.components if c.is_llm)
    mix = tuple((int(r.work[comp]["prompt_tokens"]), int(r.work[comp]["output_tokens"])) for r in requests)
    engine = read_engine_config(url)
    cap = RequestSpec("capacity", mix[0][0], mix[0][1], concurrency=(engine.max_num_seqs,), sizes=mix,
                      duration_s=window_s)
    res = run_profile(ProfileRun(url, model.name, comp, "cpu", 1, (cap,), api="completions",
                                 vocab=int(model.component(comp).size.vocab or 0), salt=7))
    pt = res.points[0] if res.points else None
    return {
        # requests completed in the steady window per second: depends on the mix completed, so
        # a policy that holds the long class (long prompts) completes more short ones here
        "capacity_rps": pt.request_throughput if pt else None,
        "capacity_output_tokens_per_s": pt.output_throughput if pt else None,
        # prompt + output tokens of every request of the point over its wall time (ramp and
        # drain included): the engine's work rate whatever the mix
        "capacity_tokens_per_s": (pt.prompt_total + pt.output_total) / pt.wall_s
        if pt and pt.wall_s else None,
        "capacity_error": res.error,
    }


def run_one(policy: str, opts: LiveSchedOptions, streams: Mapping[str, Sequence[Request]],
            table: Mapping[str, Any], slo_s: Mapping[str, float],
            say: Callable[[str], None]) -> dict[str, Any]:
    """Start an engine with ``policy``, measure each of ``streams`` in turn (label -> requests),
    then its capacity, stop it. The capacity uses the first stream's sizes."""
    spec = server_spec(policy, opts, table)
    say(f"{policy}: starting vLLM" + (f" with {spec.scheduler_cls}" if spec.scheduler_cls else ""))
    with (VllmServer(spec) as server,
          isolate_engine(server.pgid, "worker", opts.nice_engine_core) as (pinning, niced)):
        say(f"{policy}: {pinning.describe()}; engine core: {niced} threads at niceness "
            f"{opts.nice_engine_core if niced else 0}")
        out: dict[str, Any] = {"policy": policy, "scheduler_cls": spec.scheduler_cls,
                               "startup_s": server.started_s,
                               "pinning": {**pinning.to_json(),
                                           "engine_core_nice": opts.nice_engine_core if niced else None,
                                           "engine_core_threads_niced": niced},
                               "streams": {}}
        for label, requests in streams.items():
            say(f"{policy}: replaying {len(requests)} requests ({label})")
            out["streams"][label] = measure_stream(server.url, opts.workload.model, requests, slo_s,
                                                   opts.drain_s)
        if opts.capacity_s > 0:
            say(f"{policy}: capacity")
            first = next(iter(streams.values()))
            out.update(engine_capacity(server.url, opts.workload.model, first, opts.capacity_s))
    return out


def stream_label(rate: float) -> str:
    return f"{rate:g} req/s"


def run_live_sched(opts: LiveSchedOptions, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Replay one seeded stream per rate against every policy (module docstring); the JSON document."""
    tell = say or (lambda _m: None)
    wl = opts.workload
    slo_s, table = class_table(wl, opts.long_types)
    slo = {t: s * 1e3 for t, s in slo_s.items()}
    streams = {stream_label(r): generate(wl, duration_s=opts.duration_s, rate=r, seed=opts.seed)
               for r in (opts.rate, *opts.extra_rates)}
    runs = [run_one(p, opts, streams, table, slo_s, tell) for p in opts.policies]
    return {
        "workload": wl.spec.name, "rates": [opts.rate, *opts.extra_rates], "duration_s": opts.duration_s,
        "requests": {k: len(v) for k, v in streams.items()}, "slo_ms": slo,
        "long_types": list(opts.long_types), "policy_options": opts.policy_options, "runs": runs,
        "wrapper_cost": wrapper_cost(runs),
    }


COST_METRICS = ("span_rps", "window_rps", "steady_tokens_per_s")


def wrapper_cost(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each wrapped run against the ``bare`` run of the same repeat (``repeat``, default 0): the
    relative difference (wrapped - bare) / bare of every throughput metric per stream, and of the
    closed-loop capacity in requests (mix-dependent) and in tokens per second. Runs of a repeat
    without a bare run are left out."""
    bare = {r.get("repeat", 0): r for r in runs if r["policy"] == "bare"}
    out = []
    for r in runs:
        ref = bare.get(r.get("repeat", 0))
        if r["policy"] == "bare" or ref is None:
            continue
        streams = {
            label: {k: _ratio(m["throughput"].get(k), ref["streams"][label]["throughput"].get(k))
                    for k in COST_METRICS}
            for label, m in r["streams"].items() if label in ref["streams"]
        }
        out.append({"policy": r["policy"], "repeat": r.get("repeat", 0), "streams": streams,
                    "capacity": _ratio(r.get("capacity_rps"), ref.get("capacity_rps")),
                    "capacity_tokens": _ratio(r.get("capacity_tokens_per_s"),
                                              ref.get("capacity_tokens_per_s"))})
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return (a - b) / b if a is not None and b else None
