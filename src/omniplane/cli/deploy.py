"""``omniplane deploy | loadgen | rehearse``: run a plan on Ray Serve, load it, rehearse it.

Ray is imported inside the commands that need it, so ``omniplane --help`` never imports it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import sys
import threading
from contextlib import redirect_stdout
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli.output import console, fail, print_json
from omniplane.cli.slo import SloOpt, legacy_solo_policy, slo_choice
from omniplane.spec import (
    LatencyTargets,
    ResolvedPlan,
    ResolvedWorkload,
    SLOChoice,
    SpecError,
    find_catalog_workload,
    load_gpus,
    load_plan,
    load_workload,
)

PlanArg = Annotated[Path, typer.Argument(help="Plan file (kind: plan).", exists=True, dir_okay=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
WorkloadOpt = Annotated[str, typer.Option("--workload", help="Workload spec: catalog name or YAML file.")]
DurationOpt = Annotated[float, typer.Option("--duration", min=0.001, help="Model seconds of arrivals.")]
RateOpt = Annotated[
    float | None, typer.Option("--rate", min=0.0, help="Arrivals per model second (default: the workload's).")
]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Random seed (default: the workload's).")]
# deprecated spellings of --slo 'Mx solo pQ' (hidden; cli/slo.py)
SloMultOpt = Annotated[float | None, typer.Option("--slo-multiplier", hidden=True)]
SloPctOpt = Annotated[float | None, typer.Option("--slo-percentile", hidden=True)]
LEGACY = "--slo-multiplier/--slo-percentile"
ApiOpt = Annotated[
    str, typer.Option("--api", help="typed (/v1/omniplane/requests) or chat (/v1/chat/completions).")
]
PortOpt = Annotated[int, typer.Option("--port", min=1, max=65535, help="HTTP port of the Serve proxy.")]
ScaleOpt = Annotated[
    float, typer.Option("--time-scale", min=0.001, help="Emulated engine: wall seconds per model second.")
]
EngineModelOpt = Annotated[
    str, typer.Option("--engine-model", help="vllm: the weights to serve (default: the tiny test fixture).")
]


def _need_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        fail("Ray Serve is not installed: pip install 'omniplane[deploy]' (or make deploy-deps)")


def _plan(path: Path) -> ResolvedPlan:
    try:
        return load_plan(path)
    except SpecError as exc:
        fail(str(exc))


def _workload(ref: str) -> ResolvedWorkload:
    path = find_catalog_workload(ref) or Path(ref)
    if not path.is_file():
        fail(f"--workload {ref!r}: no catalog workload of that name and no such file")
    try:
        return load_workload(path)
    except SpecError as exc:
        fail(str(exc))


def deploy(
    plan_file: PlanArg,
    engine: Annotated[str, typer.Option("--engine", help="emulated, vllm-omni or vllm.")] = "emulated",
    engine_model: EngineModelOpt = "",
    address: Annotated[
        str | None,
        typer.Option("--address", help="Existing Ray cluster (default: start a local one on 127.0.0.1)."),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address the HTTP proxy binds to.")] = "127.0.0.1",
    port: PortOpt = 8000,
    time_scale: ScaleOpt = 1.0,
    max_in_flight: Annotated[
        int, typer.Option("--max-in-flight", min=1, help="Requests admitted before shedding with 503.")
    ] = 1024,
    config_dir: Annotated[
        Path, typer.Option("--config-dir", help="vllm-omni: where to write stage configs.")
    ] = Path("vllm-omni-configs"),
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Show the deployments (and write vllm-omni configs) without starting Ray."
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Deploy a plan on Ray Serve: one deployment per node (replicas = executors), an HTTP ingress."""
    from omniplane.deploy.engines import ENGINES
    from omniplane.deploy.orchestrator import deployment_name

    if engine not in ENGINES:
        fail(f"--engine must be one of {', '.join(ENGINES)} (got {engine!r})")
    plan = _plan(plan_file)
    deps = [
        {
            "deployment": deployment_name(n.name, g),
            "node": n.name,
            "components": list(n.components),
            "replicas": grp.count,
            "gpus_per_replica": grp.tp,
            "max_batch": grp.max_batch,
        }
        for n in plan.spec.nodes
        for g, grp in enumerate(n.executors)
    ]
    configs: list[str] = []
    if engine == "vllm-omni":
        from omniplane.deploy.vllm_omni import write_stage_configs

        try:
            configs = [str(p) for p in write_stage_configs(plan, config_dir)]
        except ValueError as exc:
            fail(str(exc))
    summary: dict[str, Any] = {
        "plan": plan.spec.name,
        "engine": engine,
        "deployments": deps,
        "stage_configs": configs,
        "url": f"http://{host}:{port}",
        # the targets the ingress reports to loadgen (GET /v1/omniplane/info): the plan file's slo
        "slo_ms": dict(plan.spec.slo.targets_ms) if plan.spec.slo is not None else None,
    }
    if dry_run:
        _show_deployments(summary, json_out)
        return
    _need_ray()
    if address is None:
        from omniplane.deploy.cluster import prefer_loopback

        prefer_loopback()  # before Ray is imported
    if engine == "vllm" and time_scale != 1.0:
        fail("--engine vllm runs in real time: --time-scale must be 1")
    _serve_forever(
        plan, engine, address, host, port, time_scale, max_in_flight, str(config_dir), summary, json_out,
        engine_model,
    )


def _show_deployments(summary: dict[str, Any], json_out: bool) -> None:
    if json_out:
        print_json(summary)
        return
    table = Table(title=f"{summary['plan']} on Ray Serve ({summary['engine']})")
    for col in ("deployment", "components", "replicas", "GPUs/replica", "max batch"):
        table.add_column(col)
    for d in summary["deployments"]:
        table.add_row(
            d["deployment"],
            ", ".join(d["components"]),
            str(d["replicas"]),
            str(d["gpus_per_replica"]),
            str(d["max_batch"]),
        )
    console.print(table)
    for c in summary["stage_configs"]:
        console.print(f"wrote {c}")


def _serve_forever(
    plan: ResolvedPlan,
    engine: str,
    address: str | None,
    host: str,
    port: int,
    time_scale: float,
    max_in_flight: int,
    config_dir: str,
    summary: dict[str, Any],
    json_out: bool,
    engine_model: str = "",
) -> None:
    from omniplane.deploy.cluster import deploy as do_deploy
    from omniplane.deploy.cluster import ray_cluster
    from omniplane.deploy.serve_app import DeployOptions

    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    real_stdout = sys.stdout
    # Ray's driver prints its processes' warnings to sys.stdout; stdout is for our document
    with redirect_stdout(sys.stderr), ray_cluster(address, port=port, host=host):
        do_deploy(
            plan,
            DeployOptions(
                engine=engine,
                time_scale=time_scale,
                max_in_flight=max_in_flight,
                config_dir=str(Path(config_dir).resolve()),
                engine_model=engine_model,
            ),
        )
        if json_out:
            real_stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
            real_stdout.flush()
        else:
            _show_deployments(summary, False)
            console.print(f"serving at {summary['url']} (Ctrl-C to stop)")
        stop.wait()


def loadgen(
    url: Annotated[str, typer.Option("--url", help="Ingress base URL, e.g. http://127.0.0.1:8000.")],
    workload: WorkloadOpt,
    duration: DurationOpt,
    rate: RateOpt = None,
    seed: SeedOpt = None,
    time_scale: Annotated[
        float | None,
        typer.Option(
            "--time-scale", min=0.001, help="Wall seconds per model second (default: the server's, else 1)."
        ),
    ] = None,
    api: ApiOpt = "typed",
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="GPU kind for resolving an SLO policy (default: the server's plan GPU)."),
    ] = None,
    slo: SloOpt = None,
    slo_multiplier: SloMultOpt = None,
    slo_percentile: SloPctOpt = None,
    drain: Annotated[
        float,
        typer.Option(
            "--drain",
            min=0.0,
            help="Model seconds to wait after the last arrival; unanswered requests then count as lost.",
        ),
    ] = 30.0,
    json_out: JsonOpt = False,
) -> None:
    """Replay a workload against an ingress; per-type latency, SLO attainment and goodput."""
    from omniplane.loadgen.client import LoadOptions, fetch_info, replay
    from omniplane.loadgen.metrics import summarize
    from omniplane.workload import generate

    if api not in ("typed", "chat"):
        fail(f"--api must be typed or chat (got {api!r})")
    wl = _workload(workload)
    info = fetch_info(url)
    scale = time_scale or float(info.get("time_scale", 1.0))
    choice = slo_choice(slo, wl.model.type_names, legacy_solo_policy(slo_multiplier, slo_percentile), LEGACY)
    try:
        targets = _server_targets(wl, info, choice, gpu)
    except (KeyError, ValueError) as exc:
        fail(str(exc).strip('"'))
    requests = generate(wl, duration_s=duration, rate=rate, seed=seed)
    records = asyncio.run(
        replay(
            requests,
            LoadOptions(
                url,
                time_scale=scale,
                api=api,
                drain_s=drain,
                run_id=f"lg{seed or 0}-",
                model=wl.model.name,
                inputs={rt.name: [m.value for m in rt.inputs] for rt in wl.model.request_types},
                outputs={rt.name: rt.output.value for rt in wl.model.request_types},
            ),
        )
    )
    result = summarize(records, targets)
    result.update({"url": url, "workload": wl.spec.name, "time_scale": scale, "api": api})
    if json_out:
        print_json(result)
        return
    _show_metrics(result)


def _server_targets(
    wl: ResolvedWorkload, info: dict[str, Any], choice: SLOChoice | None, gpu: str | None
) -> dict[str, float]:
    """The deployed plan's targets (the ingress says them, from the plan file's ``slo``) unless
    ``--slo`` asks otherwise; else the workload's policy on the server's GPU kind and budget."""
    from omniplane.plan.slo import command_targets

    stored = info.get("slo")
    plan_slo = LatencyTargets.model_validate(stored) if isinstance(stored, dict) else None
    gpu_name = gpu or info.get("gpu")
    kind = load_gpus().get(gpu_name) if gpu_name else None
    budget = info.get("gpus") if isinstance(info.get("gpus"), int) else None
    if kind is not None and budget is None:
        budget = kind.gpus_per_node  # assumption: a server that does not say its budget has one node
    targets, _ = command_targets(choice, wl, stored=plan_slo, gpu=kind, gpus=budget,
                                 where="the server's plan")
    return targets.seconds


def _fmt(x: Any, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _show_metrics(result: dict[str, Any]) -> None:
    table = Table(
        title=f"{result.get('workload', '')}: {result['completed']}/{result['sent']} completed, "
        f"goodput {_fmt(result.get('request_goodput'), 3)} req/s"
    )
    for col in ("type", "sent", "done", "failed", "lost", "SLO ms", "p50 ms", "p99 ms", "attain.", "goodput"):
        table.add_column(col, justify="right")
    for t, m in result["per_type"].items():
        table.add_row(
            t,
            str(m["sent"]),
            str(m["completed"]),
            str(m["failed"] + m["shed"]),
            str(m["lost"]),
            _fmt(m["slo_ms"], 0),
            _fmt(m["p50_first_response_ms"]),
            _fmt(m["p99_first_response_ms"]),
            _fmt(m["attainment"], 2),
            _fmt(m["request_goodput"], 3),
        )
    console.print(table)


def rehearse(
    plan_file: PlanArg,
    duration: DurationOpt,
    workload: Annotated[str | None, typer.Option(
        "--workload", help="Workload spec: catalog name or YAML file (default: the plan's).")] = None,
    rate: RateOpt = None,
    seed: SeedOpt = None,
    time_scale: Annotated[float | None, typer.Option(
        "--time-scale", min=0.001, help="Emulated engine: wall seconds per model second (default 10).")
    ] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="emulated or vllm (real vLLM engines).")] = "emulated",
    engine_model: EngineModelOpt = "",
    kill_replica: Annotated[
        str | None,
        typer.Option("--kill-replica", help="Kill one replica of this plan node (or auto) mid-run."),
    ] = None,
    kill_at: Annotated[
        float,
        typer.Option(
            "--kill-at", min=0.0, max=1.0, help="When to kill, as a fraction of the arrival window."
        ),
    ] = 0.5,
    port: PortOpt = 8000,
    api: ApiOpt = "typed",
    slo: SloOpt = None,
    slo_multiplier: SloMultOpt = None,
    slo_percentile: SloPctOpt = None,
    max_in_flight: Annotated[int, typer.Option("--max-in-flight", min=1)] = 1024,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the JSON document here.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Deploy on a local Ray cluster, replay a workload (optionally killing a replica mid-run);
    with the emulated engine, compare with the simulator.

    Defaults come from the plan file: its workload, type mix and offered rate, and its latency
    targets (``slo``), as for ``sim run``."""
    from omniplane.spec import plan_load

    if engine not in ("emulated", "vllm"):
        fail(f"--engine must be emulated or vllm (got {engine!r})")
    if engine == "vllm" and time_scale not in (None, 1.0):
        fail("--engine vllm runs in real time: --time-scale must be 1")
    scale = time_scale if time_scale is not None else (10.0 if engine == "emulated" else 1.0)
    plan = _plan(plan_file)
    try:
        load = plan_load(plan, workload)
    except (SpecError, OSError) as exc:
        fail(str(exc))
    wl = load.workload
    names = [n.name for n in plan.spec.nodes]
    if kill_replica not in (None, "auto") and kill_replica not in names:
        fail(f"--kill-replica {kill_replica!r}: the plan has nodes {', '.join(names)}")
    if api not in ("typed", "chat"):
        fail(f"--api must be typed or chat (got {api!r})")
    _need_ray()
    from omniplane.deploy.cluster import prefer_loopback

    prefer_loopback()  # the rehearsal's local cluster; before Ray is imported
    from omniplane.deploy.rehearse import RehearsalConfig
    from omniplane.deploy.rehearse import rehearse as run

    cfg = RehearsalConfig(
        duration_s=duration,
        time_scale=scale,
        rate=rate if rate is not None else load.rate,
        mix=load.mix,
        seed=seed,
        kill=kill_replica,
        kill_at=kill_at,
        port=port,
        api=api,
        max_in_flight=max_in_flight,
        slo=slo_choice(slo, plan.model.type_names, legacy_solo_policy(slo_multiplier, slo_percentile),
                       LEGACY),
        engine=engine,
        engine_model=engine_model,
    )
    try:
        # Ray's driver prints its processes' warnings to sys.stdout; stdout is for our document
        with redirect_stdout(sys.stderr):
            result = run(plan, wl, cfg)
    except ValueError as exc:
        fail(str(exc))
    if out is not None:
        out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    if json_out:
        print_json(result)
        return
    sim = result["goodput_simulated"]
    console.print(
        f"sent {result['sent']}, completed {result['completed']}, failed {result['failed']}, "
        f"lost {result['lost']}; goodput measured {result['goodput_measured']:.3f} req/s, "
        + (f"simulated {sim:.3f} req/s" if sim is not None else "not simulated (real engine)")
    )
