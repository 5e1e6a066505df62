"""``omniplane deploy | loadgen | rehearse``: run a plan on Ray Serve, load it, rehearse it.

Ray is imported inside the commands that need it, so ``omniplane --help`` never imports it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli import options as opt
from omniplane.cli.deploy_omni import OmniDeploy, check_offer, need_vllm_executable, omni_deploy
from omniplane.cli.errors import fail
from omniplane.cli.files import write_json
from omniplane.cli.output import console, notice, print_json, print_table
from omniplane.cli.serving_options import (
    ApiKeyOpt,
    DeadlineOpt,
    MaxBodyOpt,
    MaxInFlightOpt,
    MaxPromptOpt,
    PortOpt,
    ScaleOpt,
    installed,
    port_free,
)
from omniplane.cli.slo import SloOpt, legacy_solo_policy, slo_choice
from omniplane.deploy.auth import API_KEY_ENV, MAX_BODY_BYTES, MAX_PROMPT_TOKENS, MAX_WORK, Guard, is_loopback
from omniplane.deploy.engines import ENGINES
from omniplane.deploy.ingress import REQUEST_DEADLINE_S
from omniplane.errors import InputError
from omniplane.spec import (
    LatencyTargets,
    ResolvedPlan,
    ResolvedWorkload,
    SLOChoice,
    find_catalog_workload,
    load_gpus,
    load_plan,
    load_workload,
)

APIS = ("typed", "chat")


PlanArg = Annotated[Path, opt.argument("Plan file (kind: plan).", opt.InputPath(), "PLAN")]
JsonOpt = Annotated[bool, opt.json_opt()]
WorkloadOpt = Annotated[str, opt.workload_opt(help="Workload spec: catalog name or YAML file.")]
DurationOpt = Annotated[float, opt.duration_opt("--duration", help="Model seconds of arrivals.")]
RateOpt = Annotated[float | None, opt.rate_opt(help="Arrivals per model second (default: the workload's).")]
SeedOpt = Annotated[int | None, opt.seed_opt("Random seed (default: the workload's).")]
# deprecated spellings of --slo 'Mx solo pQ' (hidden; cli/slo.py)
SloMultOpt = Annotated[float | None, opt.multiplier_opt("--slo-multiplier", help="Deprecated: --slo.",
                                                        hidden=True)]
SloPctOpt = Annotated[float | None, opt.percentile_opt("--slo-percentile", help="Deprecated: --slo.",
                                                       hidden=True)]
LEGACY = "--slo-multiplier/--slo-percentile"
ApiOpt = Annotated[str, opt.choice_opt("--api", help="typed (/v1/omniplane/requests) or chat "
                                       "(/v1/chat/completions).", choices=APIS, what="API")]
EngineModelOpt = Annotated[str, typer.Option(
    "--engine-model", metavar="PATH_OR_ID",
    help="vllm: the weights to serve (default: the tiny test fixture).")]


def _need_ray() -> None:
    if not installed("ray"):
        fail("Ray Serve is not installed: pip install 'omniplane[deploy]' (or make deploy-deps)")


def _plan(path: Path) -> ResolvedPlan:
    return load_plan(path)


def _workload(ref: str) -> ResolvedWorkload:
    return load_workload(find_catalog_workload(ref) or Path(ref))


def deploy(
    plan_file: PlanArg,
    engine: Annotated[str, opt.choice_opt(
        "--engine", help="emulated (rehearsal: the simulator's engines), vllm (rehearsal on real vLLM "
        "engines, one LLM per node) or vllm-omni (the export's Serve applications: vLLM-Omni's own "
        "servers behind the router).",
        choices=ENGINES, what="engine")] = "emulated",
    engine_model: EngineModelOpt = "",
    address: Annotated[
        str | None,
        typer.Option("--address", metavar="ADDRESS",
                     help="Existing Ray cluster (default: start a local one on 127.0.0.1)."),
    ] = None,
    host: Annotated[str, opt.host_opt("--host", help="Address the HTTP proxy binds to; beyond loopback "
                                      "it needs --api-key.")] = "127.0.0.1",
    port: PortOpt = 8000,
    time_scale: ScaleOpt = 1.0,
    max_in_flight: MaxInFlightOpt = 1024,
    api_key: ApiKeyOpt = None,
    max_body_mb: MaxBodyOpt = MAX_BODY_BYTES / 2**20,
    max_prompt_tokens: MaxPromptOpt = MAX_PROMPT_TOKENS,
    deadline_s: DeadlineOpt = REQUEST_DEADLINE_S,
    num_gpus: Annotated[int | None, opt.int_opt(
        "--num-gpus", help="GPUs the local Ray node offers (Ray's --num-gpus; default: those Ray "
        "detects).", lo=0, hi=4096)] = None,
    dashboard_host: Annotated[str | None, opt.host_opt(
        "--dashboard-host", help="Start Ray's dashboard (no authentication!) on this address; local "
                                 "clusters only (default: no dashboard).")] = None,
    config_dir: Annotated[Path, opt.out_dir_opt(
        "--config-dir", help="vllm-omni: where to write the deployment's files (as omniplane export "
        "--target ray-serve).")] = Path("vllm-omni-configs"),
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Show the deployments (and write the vllm-omni files) without starting Ray."
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Deploy a plan on Ray Serve: one deployment per node (replicas = executors), an HTTP ingress.

    Only clients with the API key reach a deployment bound beyond loopback: --host other than
    127.0.0.1 / localhost / ::1 is refused without --api-key (or OMNIPLANE_API_KEY). Ray's own
    ports stay on 127.0.0.1 for a local cluster (docs/guides/deploy.md, "Who may send work").
    """
    from omniplane.deploy.orchestrator import deployment_name

    if api_key is not None and not api_key.strip():
        fail("--api-key: the key is empty")
    if not is_loopback(host) and not api_key:
        fail(f"--host {host}: binding beyond loopback lets anyone who can reach the port send work; "
             f"give --api-key KEY (or set {API_KEY_ENV}) so only keyed clients are served, or bind "
             "127.0.0.1")
    if dashboard_host is not None and address is not None:
        fail("--dashboard-host: the dashboard of an existing cluster (--address) is the cluster's own")
    if dashboard_host is not None and not is_loopback(dashboard_host):
        notice(f"warning: Ray's dashboard on {dashboard_host} has no authentication: anyone who reaches "
               "it can run jobs on this cluster")
    if engine == "vllm" and time_scale != 1.0:
        fail(f"--time-scale {time_scale:g}: --engine vllm runs in real time, so the scale must be 1")
    if num_gpus is not None and address is not None:
        fail("--num-gpus: the GPUs of an existing cluster (--address) are its nodes' own")
    if engine == "vllm-omni" and not dry_run and address is None:
        need_vllm_executable()  # the local replicas run it (a remote cluster's nodes may have it)
    guard = Guard.with_keys([api_key] if api_key else [], max_body_bytes=int(max_body_mb * 2**20),
                            max_prompt_tokens=max_prompt_tokens)
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
    omni = None
    if engine == "vllm-omni":  # the files `omniplane export --target ray-serve` writes
        omni = omni_deploy(plan, guard, max_in_flight=max_in_flight, deadline_s=deadline_s,
                           local=address is None and not dry_run, num_gpus=num_gpus, config_dir=config_dir)
    summary: dict[str, Any] = {
        "plan": plan.spec.name,
        "engine": engine,
        "deployments": deps,
        "stage_configs": [str(config_dir / f"{a}.yaml") for a in omni.apps if a != "router"] if omni else [],
        "export": [str(p) for p in omni.files] if omni else [],
        "url": f"http://{host}:{port}",
        "api_key": "required" if guard.keyed else "none (loopback only)",
        "limits": {"max_body_bytes": guard.max_body_bytes, "max_prompt_tokens": guard.max_prompt_tokens,
                   "work": MAX_WORK, "deadline_s": deadline_s, "body_timeout_s": guard.body_timeout_s},
        # the targets the ingress reports to loadgen (GET /v1/omniplane/info): the plan file's slo
        "slo_ms": dict(plan.spec.slo.targets_ms) if plan.spec.slo is not None else None,
    }
    if dry_run:
        _show_deployments(summary, json_out)
        return
    if address is None:  # the local cluster's proxy listens here: a port in use fails before Ray starts
        port_free(host, port)
    _need_ray()
    from omniplane.deploy.cluster import check_reachable, prefer_loopback

    if address is None:
        prefer_loopback()  # before Ray is imported: serve_app imports it
    else:
        check_reachable(address)  # a wrong address fails here, in seconds, before Ray retries it
    from omniplane.deploy.serve_app import DeployOptions

    # The guard holds the key's digest only; the Ray processes this driver starts inherit its
    # environment, so the key in clear leaves it before Ray starts them.
    os.environ.pop(API_KEY_ENV, None)
    from omniplane.deploy.proxy_auth import installed

    with installed(guard):  # Ray Serve's own /-/routes: its proxy inherits the key digests
        _serve_forever(
            plan,
            DeployOptions(engine=engine, time_scale=time_scale, max_in_flight=max_in_flight,
                          deadline_s=deadline_s,
                          guard=guard, engine_model=engine_model),
            address, host, port, dashboard_host, summary, json_out, omni, num_gpus,
        )


def _show_deployments(summary: dict[str, Any], json_out: bool) -> None:
    if json_out:
        print_json(summary)
        return
    table = Table(title=f"{summary['plan']} on Ray Serve ({summary['engine']})")
    table.add_column("deployment", no_wrap=True)
    for col in ("components", "replicas", "GPUs/replica", "max batch"):
        table.add_column(col)
    for d in summary["deployments"]:
        table.add_row(
            d["deployment"],
            ", ".join(d["components"]),
            str(d["replicas"]),
            str(d["gpus_per_replica"]),
            str(d["max_batch"]),
        )
    print_table(table)
    for c in summary["stage_configs"]:
        console.print(f"wrote {c}")


def _serve_forever(
    plan: ResolvedPlan,
    options: Any,
    address: str | None,
    host: str,
    port: int,
    dashboard_host: str | None,
    summary: dict[str, Any],
    json_out: bool,
    omni: OmniDeploy | None = None,
    num_gpus: int | None = None,
) -> None:
    from omniplane.cli.errors import Interrupted, reclaim_signals, signals_taken_back
    from omniplane.deploy.cluster import STOP_WITHIN_S, ray_cluster
    from omniplane.deploy.cluster import deploy as do_deploy

    real_stdout = sys.stdout
    # Ray's driver prints its processes' warnings to sys.stdout; stdout is for our document
    replicas = (sum(d["replicas"] for d in summary["deployments"]) if omni is None
                else sum(len(a.get("deployments", [])) or 1 for a in omni.doc["applications"]))
    notice(f"starting {'a local Ray cluster' if address is None else 'on ' + address} and deploying "
           f"{replicas} replicas (a minute or two) ...")
    # SIGINT / SIGTERM raise Interrupted (cli/errors.py) from start-up to the end, and leaving the
    # cluster context shuts down what it started (and ends what outlived that: deploy/reap.py).
    # ray.init may replace the handlers (its core worker's, which ends this process at once and
    # leaves Ray's agents running): they are taken back as soon as it returns.
    # Once serving, either signal means "stop serving": the cluster goes down the fast way (as on
    # any exception) and the command ends with status 0 (docs/reference/command-line.md); before
    # that, it is an interruption (130 / 143).
    serving = False
    # the same rule when the stop deadline ends the process (a slow teardown under load)
    extra: dict[str, Any] = {} if omni is None else {
        "num_gpus": num_gpus, "resources": omni.local_resources, "apps": omni.apps}
    cluster = ray_cluster(address, port=port, host=host, dashboard_host=dashboard_host, **extra,
                          guard_start=signals_taken_back, stop_within_s=STOP_WITHIN_S,
                          stop_status=lambda sig: 0 if serving else 128 + sig)
    try:
        with redirect_stdout(sys.stderr), cluster:
            if omni is None:
                do_deploy(plan, options)
            else:
                import ray

                from omniplane.deploy.cluster import deploy_config

                check_offer(omni, ray.nodes())  # type: ignore[no-untyped-call]
                deploy_config(omni.doc, host=host, port=port)
            reclaim_signals()
            if json_out:
                real_stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
                real_stdout.flush()
            else:
                _show_deployments(summary, False)
                console.print(f"serving at {summary['url']} (Ctrl-C to stop)")
            serving = True
            while True:
                time.sleep(0.5)
    except Interrupted as exc:
        if not serving:
            raise
        notice(f"{exc}: stopped serving")


def loadgen(
    url: Annotated[str, opt.url_opt("--url", help="Ingress base URL, e.g. http://127.0.0.1:8000.")],
    workload: WorkloadOpt,
    duration: DurationOpt,
    rate: RateOpt = None,
    seed: SeedOpt = None,
    time_scale: Annotated[float | None, opt.float_opt(
        "--time-scale", help="Wall seconds per model second (default: the server's, else 1).", lo=0.001,
        hi=1e4)] = None,
    api: ApiOpt = "typed",
    gpu: Annotated[str | None, opt.gpu_opt(
        "--gpu", help="GPU kind for resolving an SLO policy (default: the server's plan GPU).")] = None,
    slo: SloOpt = None,
    slo_multiplier: SloMultOpt = None,
    slo_percentile: SloPctOpt = None,
    drain: Annotated[float, opt.float_opt(
        "--drain", help="Model seconds to wait after the last arrival; unanswered requests then count "
                        "as unfinished.", lo=0, hi=1e6)] = 30.0,
    api_key: ApiKeyOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Replay a workload against an ingress; per-type latency, SLO attainment and goodput."""
    from omniplane.loadgen.client import LoadOptions, fetch_info, replay
    from omniplane.loadgen.metrics import summarize
    from omniplane.workload import generate

    wl = _workload(workload)
    try:
        info = fetch_info(url, api_key=api_key)
    except InputError as exc:
        fail(f"--url {exc}")
    scale = time_scale or float(info.get("time_scale", 1.0))
    choice = slo_choice(slo, wl.model.type_names, legacy_solo_policy(slo_multiplier, slo_percentile), LEGACY)
    try:
        targets = _server_targets(wl, info, choice, gpu)
    except (KeyError, ValueError) as exc:
        fail(str(exc).strip('"'))
    requests = generate(wl, duration_s=duration, rate=rate, seed=seed)
    if requests:
        wall = (max(r.arrival for r in requests) + drain) * scale
        notice(f"replaying {len(requests)} requests against {url} (at most {wall:.0f} s) ...")
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
                api_key=api_key,
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
    from omniplane.slo.resolve import command_targets

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
    for col in ("type", "sent", "done", "failed", "lost", "unfin.", "SLO ms", "p50 ms", "p99 ms", "attain.",
                "goodput"):
        table.add_column(col, justify="right")
    for t, m in result["per_type"].items():
        table.add_row(
            t,
            str(m["sent"]),
            str(m["completed"]),
            str(m["failed"] + m["shed"]),
            str(m["lost"]),
            str(m["unfinished"]),
            _fmt(m["slo_ms"], 0),
            _fmt(m["p50_first_response_ms"]),
            _fmt(m["p99_first_response_ms"]),
            _fmt(m["attainment"], 2),
            _fmt(m["request_goodput"], 3),
        )
    print_table(table)


def rehearse(
    plan_file: PlanArg,
    duration: DurationOpt,
    workload: Annotated[str | None, opt.workload_opt(
        help="Workload spec: catalog name or YAML file (default: the plan's).")] = None,
    rate: RateOpt = None,
    seed: SeedOpt = None,
    time_scale: Annotated[float | None, opt.float_opt(
        "--time-scale", help="Emulated engine: wall seconds per model second (default 10; vllm: 1).",
        lo=0.001, hi=1e4)] = None,
    engine: Annotated[str, opt.choice_opt(
        "--engine", help="Stage engine (vllm: real vLLM engines).", choices=("emulated", "vllm"),
        what="engine")] = "emulated",
    engine_model: EngineModelOpt = "",
    kill_replica: Annotated[
        str | None,
        typer.Option("--kill-replica", metavar="NODE",
                     help="Kill one replica of this plan node (or auto) mid-run."),
    ] = None,
    kill_at: Annotated[float, opt.float_opt(
        "--kill-at", help="When to kill, as a fraction of the arrival window.", lo=0, hi=1)] = 0.5,
    port: PortOpt = 8000,
    api: ApiOpt = "typed",
    slo: SloOpt = None,
    slo_multiplier: SloMultOpt = None,
    slo_percentile: SloPctOpt = None,
    max_in_flight: MaxInFlightOpt = 1024,
    out: Annotated[Path | None, opt.out_opt("--out", help="Also write the JSON document here.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Deploy on a local Ray cluster, replay a workload (optionally killing a replica mid-run);
    with the emulated engine, compare with the simulator.

    Defaults come from the plan file: its workload, type mix and offered rate, and its latency
    targets (``slo``), as for ``sim run``."""
    from omniplane.spec import plan_load

    if engine == "vllm" and time_scale not in (None, 1.0):
        fail(f"--time-scale {time_scale:g}: --engine vllm runs in real time, so the scale must be 1")
    scale = time_scale if time_scale is not None else (10.0 if engine == "emulated" else 1.0)
    plan = _plan(plan_file)
    load = plan_load(plan, workload)
    wl = load.workload
    names = [n.name for n in plan.spec.nodes]
    if kill_replica not in (None, "auto") and kill_replica not in names:
        fail(f"--kill-replica {kill_replica!r}: the plan has nodes {', '.join(names)} (or auto)")
    port_free("127.0.0.1", port)
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
            result = run(plan, wl, cfg, say=notice)
    except ValueError as exc:
        fail(str(exc))
    if out is not None:
        write_json(out, result)
    if json_out:
        print_json(result)
        return
    sim = result["goodput_simulated"]
    console.print(
        f"sent {result['sent']}, completed {result['completed']}, failed {result['failed']}, "
        f"lost {result['lost']}, unfinished at the deadline {result['unfinished']}; "
        f"goodput measured {result['goodput_measured']:.3f} req/s, "
        + (f"simulated {sim:.3f} req/s" if sim is not None else "not simulated (real engine)")
    )
