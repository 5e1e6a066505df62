"""Rehearse a plan: local Ray cluster, a stage engine (emulated by default; ``vllm``: real vLLM
engines of the tiny fixture), replay a workload, optionally kill a replica mid-run, compare with
the simulator on the same requests (emulated engine only: the simulator prices the plan's GPU
kind, not the host a real CPU engine runs on), tear down.

``lost`` counts requests that neither completed nor got an error the client could see (HTTP
error status or an error in the stream): transport failures and streams cut short.
``unfinished`` counts those still unanswered when the replay's deadline passed (``drain_s``
model seconds after the last arrival): the run ended first, the deployment dropped nothing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from omniplane.deploy.cluster import LOOPBACK, deploy, kill_replica, ray_cluster, replica_actors
from omniplane.deploy.cpu import CpuMeter
from omniplane.deploy.orchestrator import deployment_name
from omniplane.deploy.serve_app import DeployOptions
from omniplane.loadgen.client import LEAD_S, LoadOptions, replay
from omniplane.loadgen.metrics import Record, summarize
from omniplane.perf import CostModel
from omniplane.perf.runtime import plan_pricing
from omniplane.sim import SimResult, simulate
from omniplane.slo.resolve import command_targets, plan_budget, plan_runtime
from omniplane.spec import LatencyTargets, ResolvedPlan, ResolvedWorkload, SLOChoice
from omniplane.workload import Request, generate

WARMUP_PER_TYPE = 1  # requests of each type sent (and awaited) before the measured run


@dataclass(frozen=True)
class RehearsalConfig:
    duration_s: float  # model seconds of arrivals
    time_scale: float = 10.0  # wall seconds per model second
    rate: float | None = None  # arrivals per model second (default: the workload's)
    mix: dict[str, float] | None = None  # request-type fractions (default: the workload's)
    seed: int | None = None
    kill: str | None = None  # plan node (or "auto") to kill one replica of
    kill_at: float = 0.5  # fraction of the arrival window at which to kill
    port: int = 8000
    api: str = "typed"
    max_in_flight: int = 1024
    slo: SLOChoice | None = None  # --slo (default: the plan file's targets, else the workload's policy)
    drain_s: float = 30.0
    address: str | None = None  # an existing cluster instead of a local one
    engine: str = "emulated"
    engine_model: str = ""  # vllm: the weights (default: the tiny fixture's)


def _warmup(plan: ResolvedPlan, url: str, scale: float) -> list[Record]:
    reqs = []
    gen_reqs = generate_types(plan, WARMUP_PER_TYPE)
    for i, r in enumerate(gen_reqs):
        reqs.append(Request(i, 0.05 * i, r.type, r.work))
    return asyncio.run(replay(reqs, LoadOptions(url, time_scale=scale, run_id="warmup-", drain_s=30.0)))


def generate_types(plan: ResolvedPlan, per_type: int) -> list[Request]:
    """``per_type`` requests of every routed type (sizes sampled, seed 0)."""
    import numpy as np

    from omniplane.spec.work import sample_work

    out: list[Request] = []
    rng = np.random.default_rng(0)
    for t in plan.spec.routes:
        for w in sample_work(plan.model, t, rng, per_type):
            out.append(Request(len(out), 0.0, t, w))
    return out


def rehearsal_targets(plan: ResolvedPlan, workload: ResolvedWorkload, cfg: RehearsalConfig,
                      cost: CostModel | None = None) -> tuple[LatencyTargets, str]:
    """The targets the rehearsal judges both the deployment and the simulator by: the plan
    file's ``slo`` unless ``--slo`` says otherwise (``omniplane.slo.resolve.command_targets``)."""
    return command_targets(cfg.slo, workload, stored=plan.spec.slo, gpu=plan.gpu, gpus=plan_budget(plan),
                           cost=cost, runtime=plan_runtime(plan.spec.meta))


def rehearse(plan: ResolvedPlan, workload: ResolvedWorkload, cfg: RehearsalConfig,
             say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the rehearsal; the JSON document ``omniplane rehearse --json`` prints. ``say`` is told
    what the rehearsal is doing as each long step starts (the CLI prints it on stderr)."""
    tell = say or (lambda _: None)
    if workload.model.name != plan.model.name:
        raise ValueError(
            f"workload {workload.spec.name!r} is for model {workload.model.name!r} "
            f"but plan {plan.spec.name!r} is for {plan.model.name!r}"
        )
    requests = generate(workload, duration_s=cfg.duration_s, rate=cfg.rate, seed=cfg.seed, mix=cfg.mix)
    if not requests:
        raise ValueError(f"no requests arrive within {cfg.duration_s} s; lengthen --duration")
    cost = CostModel(plan.model, runtime=plan_pricing(plan.spec.meta, plan.spec.name or "plan"))
    targets, slo_source = rehearsal_targets(plan, workload, cfg, cost)
    slo = targets.seconds
    sim: SimResult | None = None
    sim_latency: dict[int, float | None] = {}
    if cfg.engine == "emulated":
        sim = simulate(plan, requests, cost, slo_s=slo)
        sim_latency = sim.requests.latency_by_rid()
    url = f"http://{LOOPBACK}:{cfg.port}"
    t_start = time.monotonic()
    count = sum(g.count for n in plan.spec.nodes for g in n.executors)
    tell(f"starting a local Ray cluster and deploying {count} replicas (a minute or two) ...")
    with ray_cluster(cfg.address, port=cfg.port):
        opts = deploy(plan, DeployOptions(engine=cfg.engine, time_scale=cfg.time_scale,
                                          max_in_flight=cfg.max_in_flight, engine_model=cfg.engine_model))
        deploy_s = time.monotonic() - t_start
        wall = (max(r.arrival for r in requests) + cfg.drain_s) * cfg.time_scale
        tell(f"deployed in {deploy_s:.0f} s; replaying {len(requests)} requests (at most {wall:.0f} s) ...")
        warm = _warmup(plan, url, cfg.time_scale)
        killed: dict[str, Any] = {}
        timer = _schedule_kill(plan, cfg, requests, killed, url)
        meter = CpuMeter()
        load = LoadOptions(
            url,
            time_scale=opts.time_scale,
            api=cfg.api,
            drain_s=cfg.drain_s,
            run_id="run-",
            model=plan.model.name,
            inputs={rt.name: [m.value for m in rt.inputs] for rt in plan.model.request_types},
            outputs={rt.name: rt.output.value for rt in plan.model.request_types},
        )
        records = asyncio.run(replay(requests, load))
        cpu = meter.stop()
        if timer is not None:
            timer.join()
        server = _server_stats(url)
        replicas = {
            deployment_name(n.name, g): len(replica_actors(deployment_name(n.name, g)))
            for n in plan.spec.nodes
            for g in range(len(n.executors))
        }
    return _report(
        plan,
        workload,
        cfg,
        requests,
        records,
        sim,
        sim_latency,
        targets,
        slo_source,
        {
            "deploy_s": deploy_s,
            "wall_s": time.monotonic() - t_start,
            "cpu": cpu,
            "server": server,
            "warmup_completed": sum(r.status == "completed" for r in warm),
            "warmup_sent": len(warm),
            "killed": killed,
            "replicas_after": replicas,
        },
    )


def _schedule_kill(
    plan: ResolvedPlan, cfg: RehearsalConfig, requests: list[Request], killed: dict[str, Any], url: str
) -> threading.Thread | None:
    node = cfg.kill
    if not node:
        return None
    at_model = cfg.kill_at * max(r.arrival for r in requests)
    delay = LEAD_S + at_model * cfg.time_scale

    def run() -> None:
        time.sleep(delay)
        try:
            load = _server_stats(url).get("ingress", {}).get("open_sessions", {})
            killed["actor"] = kill_replica(plan, node, load)
            killed["sessions_open"] = load.get(killed["actor"].rsplit("#", 1)[-1], 0)
            killed["at_model_s"] = at_model
        except Exception as exc:  # reported, not raised: the run goes on
            killed["error"] = f"{type(exc).__name__}: {exc}"

    th = threading.Thread(target=run, name="kill-replica", daemon=True)
    th.start()
    return th


def _server_stats(url: str) -> dict[str, Any]:
    import httpx

    try:
        data = httpx.get(f"{url}/v1/omniplane/stats", timeout=10).json()
        return data if isinstance(data, dict) else {}
    except (httpx.HTTPError, ValueError):
        return {}


def _sim_type(sim: SimResult | None, t: str) -> dict[str, Any]:
    m = sim.per_type.get(t) if sim is not None else None
    if m is None:
        return {}
    return {
        "goodput": m.goodput,
        "attainment": m.attainment,
        "completed": m.completed,
        "p50_first_response_ms": m.latency_ms["p50"],
        "p99_first_response_ms": m.latency_ms["p99"],
        "mean_first_response_ms": m.latency_ms["mean"],
        "p50_e2el_ms": m.e2e_ms["p50"],
    }


def _gaps(records: list[Record], sim_latency: dict[int, float | None]) -> dict[str, Any]:
    """Where measured first-response latency departs from the simulator's, request by request
    (model ms, p10/p50/p90): ``http`` = client-side minus server-side (proxy, HTTP), ``internal``
    = server-side minus simulated (Ray calls, timer lag, and the schedule diverging once real
    time reorders events), ``total`` = client-side minus simulated."""
    http, internal, total = [], [], []
    for r in records:
        lat, sim_lat = r.latency(), sim_latency.get(r.id)
        if lat is None or sim_lat is None or r.server_first_response is None:
            continue
        http.append(lat - r.server_first_response)
        internal.append(r.server_first_response - sim_lat)
        total.append(lat - sim_lat)

    def q(xs: list[float]) -> dict[str, float] | None:
        if not xs:
            return None
        return {f"p{p}": float(np.percentile(xs, p)) * 1e3 for p in (10, 50, 90)}

    return {"http": q(http), "internal": q(internal), "total": q(total), "requests": len(total)}


def _report(
    plan: ResolvedPlan,
    workload: ResolvedWorkload,
    cfg: RehearsalConfig,
    requests: list[Request],
    records: list[Record],
    sim: SimResult | None,
    sim_latency: dict[int, float | None],
    targets: LatencyTargets,
    slo_source: str,
    extra: dict[str, Any],
) -> dict[str, Any]:
    slo = targets.seconds
    m = summarize(records, slo)
    per_type = {}
    for t, mt in m["per_type"].items():
        per_type[t] = {
            "measured": {
                "goodput": mt["request_goodput"],
                "attainment": mt["attainment"],
                "sent": mt["sent"],
                "completed": mt["completed"],
                "failed": mt["failed"],
                "shed": mt["shed"],
                "lost": mt["lost"],
                "unfinished": mt["unfinished"],
                "p50_first_response_ms": mt["p50_first_response_ms"],
                "p99_first_response_ms": mt["p99_first_response_ms"],
                "mean_first_response_ms": mt["mean_first_response_ms"],
                "p50_e2el_ms": mt["p50_e2el_ms"],
            },
            "simulated": _sim_type(sim, t),
            "slo_ms": slo[t] * 1e3,
        }
    g_meas, g_sim = m["request_goodput"] or 0.0, (sim.goodput if sim is not None else None)
    extra["latency_gap_ms"] = _gaps(records, sim_latency)
    return {
        "sent": m["sent"],
        "completed": m["completed"],
        "failed": m["failed"] + m["shed"],
        "shed": m["shed"],
        "lost": m["lost"],
        "unfinished": m["unfinished"],
        "goodput_measured": g_meas,
        "goodput_simulated": g_sim,
        "goodput_error": (g_meas - g_sim) / g_sim if g_sim else None,
        "attainment_measured": m["attainment"],
        "attainment_simulated": sim.attainment if sim is not None else None,
        "engine": cfg.engine,
        "per_type": per_type,
        "plan": plan.spec.name,
        "nodes": {n.name: n.executor_count for n in plan.spec.nodes},
        "workload": workload.spec.name,
        "duration_s": cfg.duration_s,
        "rate": cfg.rate if cfg.rate is not None else len(requests) / max(cfg.duration_s, 1e-9),
        "time_scale": cfg.time_scale,
        "slo": slo_source,
        "slo_ms": dict(targets.targets_ms),
        "api": cfg.api,
        "errors": [r.error for r in records if r.error][:10],
        **extra,
    }
