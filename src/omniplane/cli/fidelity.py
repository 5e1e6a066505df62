"""``omniplane fidelity``: how far the simulator is from a real engine
(docs/guides/check-your-engine.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli import options as opt
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, err_console, fail, print_json
from omniplane.fidelity.compare import METRICS, TARGETS, errors, within_targets
from omniplane.loadgen.affinity import Pinning

FIXTURE_DATA = Path(__file__).resolve().parents[1] / "fidelity" / "data"
DEFAULT_WORKLOAD = FIXTURE_DATA / "tiny-qwen2-fidelity.yaml"
DRIFT_WARN = 0.15  # assumption: probes this far apart around one load mean the host moved under it
LATE_MS = 50.0  # assumption: sends later than this at p99 mean the machine, not the engine, was measured
LABELS = {"throughput_rps": "throughput req/s", "ttft_p50_ms": "TTFT p50 ms", "ttft_p95_ms": "TTFT p95 ms",
          "tpot_p50_ms": "TPOT p50 ms", "tpot_p95_ms": "TPOT p95 ms", "e2e_p50_ms": "E2E p50 ms"}


def fixture_model_dir(python: str) -> Path:
    """The fixture's folder, built on first use by ``python`` (it needs torch and transformers,
    which come with vLLM)."""
    code = "from omniplane.fixture import ensure_model_dir; print(ensure_model_dir())"
    if python == sys.executable:
        from omniplane.fixture import ensure_model_dir

        try:
            return ensure_model_dir()
        except RuntimeError as exc:
            fail(str(exc))
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"building the fixture with {python} failed:\n{out.stderr.strip()[-2000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def _err(x: float | None, limit: float | None) -> str:
    if x is None:
        return "-"
    text = f"{x:+.1%}"
    if limit is None:
        return text
    return f"[green]{text}[/]" if abs(x) <= limit else f"[red]{text}[/]"


def _spread(doc: dict[str, Any]) -> list[dict[str, float | None]]:
    """Per load and metric, (max - min) / median over repeated replays (the noise floor)."""
    out = []
    for detail in doc["engine"].get("loads", []):
        runs = [r["summary"] for r in detail.get("repeats", [])]
        if len(runs) < 2:
            return []
        row: dict[str, float | None] = {}
        for k in METRICS:
            vals = sorted(v for r in runs if (v := r.get(k)) is not None)
            mid = vals[len(vals) // 2] if vals else None
            row[k] = (vals[-1] - vals[0]) / mid if vals and mid else None
        out.append(row)
    return out


def show_report(doc: dict[str, Any]) -> None:
    eng = doc["engine"]
    console.print(f"engine {eng.get('url')} ({eng.get('model')}, vLLM {eng.get('vllm_version') or '?'}): "
                  f"max_num_seqs {eng.get('max_num_seqs')}, max_num_batched_tokens "
                  f"{eng.get('max_num_batched_tokens')}, KV {eng.get('kv_cache_tokens')} tokens; capacity "
                  f"{_fmt(eng.get('capacity_measured_rps'))} req/s measured, "
                  f"{_fmt(eng.get('capacity_simulated_rps'))} simulated; front end "
                  f"{_fmt(eng.get('frontend_ms'))} ms")
    for w in eng.get("warnings", []):
        err_console.print(f"[yellow]warning:[/] {w}")
    if (pin := eng.get("pinning")) is not None:
        console.print(Pinning.from_json(pin).describe(), highlight=False)
    if busy := eng.get("capacity_cpu_cores"):
        console.print("capacity run, busy cores (CPU time / wall time): "
                      + ", ".join(f"{k} {_fmt(v)}" for k, v in busy.items()), highlight=False)
    if (sim_busy := (eng.get("capacity_simulated_stats") or {}).get("frontend_busy")) is not None:
        console.print(f"capacity run, simulated front-end busy share {_fmt(sim_busy)} "
                      "(measured: api + client above)", highlight=False)
    spread = _spread(doc)
    table = Table(title="predicted (simulator) vs measured (engine)")
    table.add_column("offered req/s")
    table.add_column("metric")
    for col in ("measured", "simulated", "error") + (("repeats spread",) if spread else ()):
        table.add_column(col, justify="right")
    for j, load in enumerate(doc["loads"]):
        err = errors(load["measured"], load["simulated"])
        for i, k in enumerate(METRICS):
            row = [_fmt(load["offered_rps"]) if i == 0 else "", LABELS[k], _fmt(load["measured"][k]),
                   _fmt(load["simulated"][k]), _err(err[k], TARGETS.get(k))]
            if spread:
                row.append(_err(spread[j].get(k), None))
            table.add_row(*row)
        table.add_section()
    console.print(table)
    for detail in eng.get("loads", []):
        cal = detail.get("calibration") or {}
        hold, dl = cal.get("holdout") or {}, cal.get("delivery") or {}
        if cal:
            drift = cal.get("probe_drift")
            console.print(
                f"load {detail.get('fraction', 0):.0%}: calibrated on probes {cal.get('probes')}: step model "
                f"held-out error median {_err(hold.get('median'), None)}, max {_err(hold.get('max'), None)}; "
                f"probe drift {_err(drift, None)}; front end {_fmt(cal.get('frontend_ms'))} ms; delivery "
                f"{_fmt(dl.get('base_ms'))} + {_fmt(dl.get('per_stream_ms'))} x streams ms/token",
                highlight=False)
            if fq := cal.get("frontend_queue"):
                fit = fq.get("in_sample_error") or {}
                busy = (detail.get("simulated_iterations") or {}).get("frontend_busy")
                console.print(
                    f"  front-end queue ({len(fq.get('samples') or [])} CPU samples, in-sample error median "
                    f"{_err(fit.get('median'), None)}): {_fmt(fq.get('per_request_ms'))} ms per request + "
                    f"{_fmt(fq.get('per_prompt_token_us'))} us per prompt token + "
                    f"{_fmt(fq.get('per_token_ms'))} ms per token + "
                    f"{_fmt(fq.get('per_iteration_ms'))} ms per iteration, on {_fmt(fq.get('cores'))} "
                    f"core; simulated busy {_fmt(busy)}"
                    + "".join(f"; {n}" for n in fq.get("notes") or ()), highlight=False)
            if (cs := cal.get("cold_start")) and cs.get("idle_ms"):
                sim = detail.get("simulated_iterations") or {}
                pts = ", ".join(f"{i:g} ms idle +{e:.2f}"
                                for i, e in zip(cs["idle_ms"], cs["extra_ms"], strict=False))
                console.print(f"  cold start after idle ({cs.get('samples')} samples): {pts} ms; simulated: "
                              f"{_fmt(sim.get('idle_arrivals'))} of arrivals find the engine idle, "
                              f"{_fmt(sim.get('cold_mean_ms'))} ms mean", highlight=False)
            mixed = (cal.get("step_model") or {}).get("mixed_coefficients_s") or {}
            if any(mixed.values()):
                n = len((cal.get("step_model") or {}).get("mixed_rows") or [])
                terms = ", ".join(f"{k} {v * 1e3:+.4g} ms" for k, v in mixed.items())
                console.print(f"  mixed iterations ({n} samples): {terms}", highlight=False)
            if drift is not None and drift > DRIFT_WARN:
                err_console.print(f"[yellow]warning:[/] load {detail.get('fraction', 0):.0%}: the probes "
                                  f"before and after its replays differ by {drift:.0%} (median per point): "
                                  "the host moved under the measurement")
        if sim_its := detail.get("simulated_iterations"):
            measured_its = [r.get("engine_iterations") or {} for r in detail.get("repeats", [])]
            console.print(
                "  iterations: measured " + ", ".join(
                    f"{_fmt(m.get('iterations'))} ({_fmt(m.get('tokens_per_iteration'))} tokens each)"
                    for m in measured_its) + f"; simulated {_fmt(sim_its.get('iterations'))} "
                f"({_fmt(sim_its.get('tokens_per_iteration'))} tokens each, "
                f"{_fmt(sim_its.get('mixed'))} mixed)",
                highlight=False)
        for dec in detail.get("ttft_decomposition_ms", []):
            m, sim = dec["measured"], dec["simulated"]
            console.print(
                f"  TTFT mean ms: measured {_fmt(m['total'])} = client {_fmt(m['client'])} + API server "
                f"{_fmt(m['api_server'])} + queue {_fmt(m['queue'])} + prefill {_fmt(m['prefill'])}; "
                f"simulated {_fmt(sim['total'])} = front end {_fmt(sim['front_end'])} + engine "
                f"{_fmt(sim['engine'])}",
                highlight=False)
        for rep in detail.get("repeats", [detail]):
            if cpu := rep.get("cpu_cores"):
                core = {k: cpu.get(f"server{k}", 0.0) - cpu.get(f"api{k}", 0.0) for k in ("", "_wait")}
                console.print(
                    "  replay, busy / CPU-waiting cores: " + ", ".join(
                        f"{name} {_fmt(busy)} / {_fmt(wait)}" for name, busy, wait in (
                            ("worker", cpu.get("worker"), cpu.get("worker_wait")),
                            ("API server", cpu.get("api"), cpu.get("api_wait")),
                            ("engine core", core[""], core["_wait"]),
                            ("client", cpu.get("client"), cpu.get("client_wait")))), highlight=False)
            sends = rep.get("send_late_ms") or {}
            late = sends.get("p99")
            if late is not None and late > LATE_MS:
                frac = detail.get("fraction", 0)
                over = (f" ({sends['over']} of {sends['sent']} later than {sends['over_ms']:.0f} ms)"
                        if "over" in sends else "")
                err_console.print(f"[yellow]warning:[/] load {frac:.0%}: the load generator sent 1% of "
                                  f"requests more than {late:.0f} ms late{over}: the machine stalled the "
                                  "client, not only the engine (measure on a quieter machine)")
    ok = within_targets(doc["loads"])
    console.print("targets (every load): " + ", ".join(
        f"{LABELS[k]} within {TARGETS[k]:.0%}: {'yes' if v else 'NO'}" for k, v in ok.items()))


def fidelity(
    url: Annotated[str | None, opt.url_opt("--url", help="A live OpenAI-compatible vLLM endpoint.")] = None,
    fixture: Annotated[bool, typer.Option(
        "--fixture", help="Start vLLM serving the tiny test fixture on 127.0.0.1 (and stop it).")] = False,
    workload: Annotated[Path | None, opt.file_opt(
        "--workload", help="Workload spec (default with --fixture: the fixture's fidelity workload).")
    ] = None,
    loads: Annotated[str, typer.Option(
        metavar="F,F,...", help="Offered loads as fractions of the measured capacity.")] = "0.3,0.6,0.9",
    duration: Annotated[float, opt.float_opt("--duration", help="Seconds of arrivals per load.", lo=1,
                                             hi=opt.MAX_SECONDS, metavar="SECONDS")] = 40.0,
    seed: Annotated[int | None, opt.seed_opt("Random seed (default: the workload's).")] = None,
    repeats: Annotated[int, opt.int_opt(
        "--repeats", help="Replays of each load (the same requests); measured = each metric's median.",
        lo=1, hi=100)] = 2,
    component: Annotated[str, typer.Option(
        metavar="NAME", help="The LLM the requests exercise (default: the only one).")] = "",
    quick: Annotated[bool, typer.Option("--quick", help="Short probes (tests, smoke runs).")] = False,
    pin: Annotated[bool, typer.Option(
        "--pin/--no-pin", help="--fixture: keep the load generator, the API server and the engine core off "
        "the cores vLLM's worker bound (CPU affinity; omniplane.loadgen.affinity).")] = True,
    pin_layout: Annotated[str, typer.Option(
        "--pin-layout", metavar="LAYOUT",
        help="--pin: 'worker' (the worker alone on its cores, the API server, the engine core and the "
        "load generator on the rest) or 'client' (the load generator alone, the rest of the engine "
        "with the worker; docs/decisions/0109-client-pin-layout.md: slower on a loaded 2-core "
        "host).")] = "worker",
    nice_engine_core: Annotated[int, opt.int_opt(
        "--nice-engine-core",
        help="--fixture --pin: run vLLM's engine-core process at this niceness (with --engine-poll 0 its "
        "yield-spinning loop starves the load generator on their shared core; "
        "docs/decisions/0107-engine-core-renice.md); a heuristic of this host's layout. 0: leave it.",
        lo=0, hi=19)] = 0,
    engine_poll: Annotated[float, opt.float_opt(
        "--engine-poll",
        help="--fixture: seconds vLLM's busy shared-memory queue readers (the engine core waiting for its "
        "worker) sleep between polls instead of spinning on sched_yield (omniplane.vllm.shmwait; "
        "docs/guides/check-your-engine.md, \"The host: labelled heuristics\"); a heuristic of this "
        "host's layout. 0: vLLM's own loop.",
        lo=0, hi=0.1, metavar="SECONDS")] = 0.0005,
    own_session: Annotated[bool, typer.Option(
        "--own-session/--same-session",
        help="--fixture: start vLLM in a session of its own (Linux: its own scheduler autogroup, which "
        "shares a core fairly with this command's whatever the niceness: --nice-engine-core then ranks "
        "the engine core below the API server only) or in this command's session and autogroup (the "
        "engine core then ranks below the load generator too; "
        "docs/decisions/0107-engine-core-renice.md).")] = True,
    max_num_seqs: Annotated[int | None, opt.int_opt(
        "--max-num-seqs", help="If the engine does not report it.", lo=1, hi=1_000_000)] = None,
    max_num_batched_tokens: Annotated[int | None, opt.int_opt(
        "--max-num-batched-tokens", help="If the engine does not report it.", lo=1, hi=100_000_000)] = None,
    vllm_python: Annotated[str, typer.Option(
        metavar="PYTHON",
        help="--fixture: the Python with vLLM installed (builds the fixture, runs the server).")
    ] = sys.executable,
    server_log: Annotated[Path | None, opt.out_opt(
        "--server-log", help="--fixture: where the server writes its log.")] = None,
    table: Annotated[Path | None, opt.out_opt("--table", help="Write the profile table (CSV) here.")] = None,
    out: Annotated[Path | None, opt.out_opt("--out", help="Write the JSON document here.")] = None,
    report: Annotated[Path | None, opt.file_opt(
        "--report", help="Only print the table of an earlier --out file.")] = None,
    json_out: Annotated[bool, opt.json_opt("Print the JSON document.")] = False,
) -> None:
    """Profile a live engine, simulate a workload on its profile, replay the workload against
    it, and print predicted vs measured (throughput, TTFT, TPOT, E2E) at several loads."""
    if report is not None:
        try:
            show_report(json.loads(report.read_text()))
        except (OSError, ValueError, KeyError) as exc:
            fail(f"{report}: not a fidelity document ({exc})")
        return
    if pin_layout not in ("client", "worker"):
        fail(f"--pin-layout must be 'client' or 'worker', got {pin_layout!r}")
    if (url is None) == (not fixture):
        fail("give exactly one of --url URL and --fixture")
    try:
        fractions = tuple(opt.Number()(x) for x in loads.split(","))
    except typer.BadParameter:
        fail(f"--loads must be comma-separated fractions (ASCII digits), got {loads!r}")
    if not fractions or any(not 0 < f <= 2 for f in fractions):
        fail(f"--loads must be fractions of the capacity in (0, 2], got {loads!r}")
    from omniplane.fidelity.calibrate import ProbePlan
    from omniplane.fidelity.engine import EngineConfigError
    from omniplane.fidelity.loop import FidelityOptions, run_fidelity
    from omniplane.fidelity.server import ServerError, ServerSpec, VllmServer
    from omniplane.loadgen.affinity import isolate_engine
    from omniplane.spec import SpecError, load_workload
    from omniplane.vllm.shmwait import ENV as SHM_POLL_ENV

    wl_path = workload or (DEFAULT_WORKLOAD if fixture else None)
    if wl_path is None:
        fail("--workload is required with --url (a workload spec whose model is the served one)")
    try:
        wl = load_workload(wl_path)
    except (SpecError, OSError) as exc:
        fail(str(exc))
    given = {k: v for k, v in (("max_num_seqs", max_num_seqs),
                               ("max_num_batched_tokens", max_num_batched_tokens)) if v is not None}
    with ExitStack() as stack:
        if fixture:
            model_dir = fixture_model_dir(vllm_python)
            waits = (f"its engine core polls its worker every {engine_poll * 1e3:g} ms (heuristic of this "
                     "host: vLLM's own wait spins on a core the front end needs)" if engine_poll > 0
                     else "vLLM's own shared-memory wait (spinning)")
            err_console.print(f"starting vLLM on the fixture {model_dir} (about a minute); {waits}",
                              highlight=False)
            env = {SHM_POLL_ENV: f"{engine_poll:g}"} if engine_poll > 0 else {}
            try:
                server = stack.enter_context(VllmServer(ServerSpec(
                    str(model_dir), served_name=wl.model.name, python=vllm_python, log=server_log,
                    new_session=own_session, env=env)))
            except ServerError as exc:
                fail(str(exc))
            url = server.url
            pinning, n = (stack.enter_context(isolate_engine(server.pgid, pin_layout, nice_engine_core))
                          if pin else (Pinning(False, note="--no-pin"), 0))
            pgid, workers = server.pgid, pinning.worker_pids
            if n:
                below = ("the API server (the load generator, in its own scheduler autogroup, shares "
                         "the core with the engine's group fairly)" if own_session
                         else "the API server and the load generator (one scheduler autogroup)")
                err_console.print(f"engine core: {n} threads at niceness {nice_engine_core} (heuristic of "
                                  f"this host: it then yields its core to {below})", highlight=False)
        else:
            pinning = Pinning(False, note="--url: the engine's processes are not this command's to pin")
            pgid, workers = None, ()
        err_console.print(pinning.describe(), highlight=False)
        assert url is not None
        opts = FidelityOptions(url, wl, fractions, duration, seed, component,
                               ProbePlan.quick() if quick else ProbePlan(), given, table, repeats=repeats,
                               engine_pgid=pgid, worker_pids=workers)
        try:
            doc = run_fidelity(opts, say=lambda msg: err_console.print(msg, highlight=False))
        except (EngineConfigError, ValueError, RuntimeError) as exc:
            fail(str(exc))
        niced = nice_engine_core if fixture and pinning.pinned else None
        doc["engine"]["pinning"] = {**pinning.to_json(), "engine_core_nice": niced,
                                    "shm_poll_s": engine_poll if fixture and engine_poll > 0 else None,
                                    "server_own_session": own_session if fixture else None}
    if out is not None:
        with Outputs() as files:
            files.text(out, json.dumps(doc, indent=2) + "\n")
            files.commit()
    if json_out:
        print_json(doc)
    else:
        show_report(doc)
        if out is not None:
            console.print(f"wrote {out}")
