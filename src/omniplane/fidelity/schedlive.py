"""HorizonServe on a live vLLM engine: the same mixed stream replayed against vLLM's own
scheduler (``bare``) and omniplane's scheduler class (``--scheduler-cls``) running ``fcfs`` and
``horizon``, each on a freshly started engine serving the tiny fixture.

Request classes travel as vLLM request priorities (the model spec's ``priority`` per type: text
0, long 10), which omniplane's scheduler class maps to its classes (an inline SLO table: each
type's path class and SLO). The engine's own scheduling policy stays ``fcfs`` (docs/vllm.md:
vLLM ignores the priority value then). Measured per class: TTFT p50/p95 and SLO attainment
(TTFT within the class's SLO); per run: throughput, and that every request completed exactly
once (each client record completed with all its tokens, and the engine's own
``vllm:request_success_total`` grew by exactly the number sent). Optionally each engine's
capacity (closed loop at ``max_num_seqs``, the profiler's steady-state window) gives the
wrapper's throughput cost at saturation.

No GPU here: the spatial controller has nothing to throttle (no SM ladder, ``total_sms`` 0);
the temporal side (N:M rotation, slack guard, long-path admission cap) is what runs.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from omniplane.fidelity.compare import measured_timings, summarize
from omniplane.fidelity.engine import read_engine_config
from omniplane.fidelity.server import ServerSpec, VllmServer
from omniplane.loadgen.client import LoadOptions, replay
from omniplane.loadgen.metrics import COMPLETED, Record
from omniplane.loadgen.metrics import summarize as loadgen_summary
from omniplane.perf.profiler import ProfileRun, RequestSpec, run_profile
from omniplane.spec import ModelSpec, ResolvedWorkload
from omniplane.vllm.settings import load_settings
from omniplane.workload import Request, generate

SCHEDULER_CLS = "omniplane.vllm.scheduler.OmniplaneScheduler"
POLICIES = ("bare", "fcfs", "horizon")
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


def scheduler_args(policy: str, table: Mapping[str, Any],
                   options: Mapping[str, Any] | None = None) -> tuple[str | None, dict[str, Any] | None]:
    """``(scheduler_cls, additional_config)`` of one policy (``bare``: vLLM's own scheduler)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r} (expected one of {', '.join(POLICIES)})")
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
    return SCHEDULER_CLS, {"omniplane": settings}


@dataclass(frozen=True)
class LiveSchedOptions:
    model_dir: str
    workload: ResolvedWorkload
    rate: float
    duration_s: float = 60.0
    seed: int | None = None
    policies: tuple[str, ...] = POLICIES
    long_types: tuple[str, ...] = ("long",)  # request types on the long path (HorizonServe 4.1)
    policy_options: dict[str, Any] = field(default_factory=dict)
    capacity_s: float = 0.0  # > 0: also each engine's closed-loop capacity (that long a window)
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
        out[t] = {k: v[k] for k in ("sent", "completed", "lost", "failed", "slo_ms", "attainment",
                                    "p50_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "p50_e2el_ms")}
    return out


def run_one(policy: str, opts: LiveSchedOptions, requests: Sequence[Request], table: Mapping[str, Any],
            slo_s: Mapping[str, float], say: Callable[[str], None]) -> dict[str, Any]:
    """Start an engine with ``policy``, warm it up, replay ``requests``, stop it."""
    model = opts.workload.model
    comp = next(c.name for c in model.components if c.is_llm)
    vocab = int(model.component(comp).size.vocab or 0)
    cls, extra = scheduler_args(policy, table, opts.policy_options)
    if extra is not None:
        load_settings(extra, {})  # a bad setting fails here, not a minute into the engine's start-up
    log = opts.log_dir / f"vllm-{policy}.log" if opts.log_dir else None
    spec = ServerSpec(opts.model_dir, served_name=model.name, python=opts.python or sys.executable,
                      scheduler_cls=cls, additional_config=extra, log=log)
    priorities = {rt.name: rt.priority for rt in model.request_types if rt.priority is not None}
    say(f"{policy}: starting vLLM" + (f" with {cls}" if cls else ""))
    with VllmServer(spec) as server:
        load = LoadOptions(server.url, api="completions", model=model.name, component=comp, vocab=vocab,
                           priorities=priorities, drain_s=opts.drain_s)
        warm = [Request(i, 0.05 * i, r.type, r.work) for i, r in enumerate(requests[:WARMUP])]
        asyncio.run(replay(warm, LoadOptions(**{**load.__dict__, "run_id": "warmup-"})))
        before = asyncio.run(_success_total(server.url))
        say(f"{policy}: replaying {len(requests)} requests")
        records = asyncio.run(replay(requests, LoadOptions(**{**load.__dict__, "run_id": "stream-"})))
        after = asyncio.run(_success_total(server.url))
        delta = after - before if after is not None and before is not None else None
        out: dict[str, Any] = {
            "policy": policy,
            "scheduler_cls": cls,
            "startup_s": server.started_s,
            "exactly_once": exactly_once(requests, records, comp, delta),
            "per_class": _per_class(records, slo_s),
            "overall": summarize(measured_timings(records)),
        }
        if opts.capacity_s > 0:
            mix = [(int(r.work[comp]["prompt_tokens"]), int(r.work[comp]["output_tokens"])) for r in requests]
            engine = read_engine_config(server.url)
            cap = RequestSpec("capacity", mix[0][0], mix[0][1], concurrency=(engine.max_num_seqs,),
                              sizes=tuple(mix), duration_s=opts.capacity_s)
            say(f"{policy}: capacity at concurrency {engine.max_num_seqs}")
            res = run_profile(ProfileRun(server.url, model.name, comp, "cpu", 1, (cap,), api="completions",
                                         vocab=vocab, salt=7))
            out["capacity_rps"] = res.points[0].request_throughput if res.points else None
            out["capacity_error"] = res.error
    return out


def run_live_sched(opts: LiveSchedOptions, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Replay one seeded stream against every policy (module docstring); the JSON document."""
    tell = say or (lambda _m: None)
    wl = opts.workload
    slo = getattr(wl.spec.slo, "targets_ms", None)
    if not slo:
        raise ValueError(f"workload {wl.spec.name}: the live comparison needs explicit SLO targets "
                         "(slo: {policy: explicit, targets_ms: ...})")
    slo_s = {t: ms / 1e3 for t, ms in slo.items()}
    table = slo_table(wl.model, slo_s, opts.long_types,
                      f"assumption: the explicit targets of workload {wl.spec.name}")
    requests = generate(wl, duration_s=opts.duration_s, rate=opts.rate, seed=opts.seed)
    runs = [run_one(p, opts, requests, table, slo_s, tell) for p in opts.policies]
    doc: dict[str, Any] = {
        "workload": wl.spec.name, "rate": opts.rate, "duration_s": opts.duration_s,
        "requests": len(requests), "slo_ms": slo, "long_types": list(opts.long_types),
        "policy_options": opts.policy_options, "runs": runs,
    }
    base = {r["policy"]: r for r in runs}
    if "bare" in base:
        ref = base["bare"]
        doc["wrapper_cost"] = {
            r["policy"]: {
                "throughput": _ratio(r["overall"]["throughput_rps"], ref["overall"]["throughput_rps"]),
                "capacity": _ratio(r.get("capacity_rps"), ref.get("capacity_rps")),
            }
            for r in runs if r["policy"] != "bare"
        }
    return doc


def _ratio(a: float | None, b: float | None) -> float | None:
    return (a - b) / b if a is not None and b else None
