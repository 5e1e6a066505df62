"""``omniplane experiment horizon``: HorizonServe's experiments (section 6) in simulation."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli import options as opt
from omniplane.cli.checkpoint import PointLog, default_path, sweep_key
from omniplane.cli.errors import fail, new_app
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, notice, print_json, print_table
from omniplane.cli.progress import StderrProgress

# The experiment's choices, here so that `omniplane --help` does not import the scheduler and
# simulator; tests/cli/test_experiment_cli.py checks them against omniplane.sched.
MODELS = ("qwen2.5-omni", "mimo-audio", "bagel")  # omniplane.repro.horizon.experiment.MODELS
TESTBEDS = ("RTX6000Ada", "RTXPRO6000")  # omniplane.repro.horizon.experiment.GPUS values
SWEEPS = ("rate", "long-fraction")  # omniplane.repro.horizon.experiment.SWEEPS
POLICIES = ("horizon", "vanilla", "edf", "mps", "edf-mps", "no-rotation", "no-sm-throttle",
            "static-split", "edf-split", "horizon-hide-always", "static-cap",
            "priority")  # omniplane.sched.factory.POLICIES

app = new_app("Reproduce the papers' experiments in simulation.")


def _x(sweep: str, point: dict[str, Any]) -> float:
    """The x value of a finished point of a ``rate`` or ``long-fraction`` sweep."""
    return float(point["rate"] if sweep == "rate" else point["long_fraction"])


def _floats(text: str | None, what: str) -> tuple[float, ...] | None:
    if text is None:
        return None
    parse = opt.Number(0, 1e6)
    try:
        xs = tuple(parse(v) for v in text.split(",") if v.strip())
    except typer.BadParameter as exc:
        fail(f"{what}: {exc.message}")
    if not xs:
        fail(f"{what}: expected at least one number")
    if len(set(xs)) != len(xs):
        fail(f"{what}: a value is given twice")
    return xs


def _result_json(r: Any) -> dict[str, Any]:
    """A finished point as one JSON line of the point log: every field of ``RunResult``."""
    from dataclasses import fields

    d = {f.name: getattr(r, f.name) for f in fields(r)}
    d["trace"] = [list(t) for t in r.trace]
    return d


def _result(d: dict[str, Any]) -> Any:
    from omniplane.repro.horizon.experiment import RunResult

    def nan(v: Any) -> float:
        return math.nan if v is None else float(v)

    def nans(m: dict[str, Any]) -> dict[str, float]:
        return {k: nan(v) for k, v in m.items()}

    return RunResult(d["policy"], float(d["rate"]), float(d["long_fraction"]), int(d["arrived"]),
                     nan(d["attainment"]), nans(d["attainment_by_class"]), nan(d["attainment_window"]),
                     int(d["completed_window"]), float(d["window_s"]), nans(d["p95_ms"]),
                     nans(d["shared_tpot_ms"]), float(d["wall_s"]), [tuple(t) for t in d.get("trace", [])],
                     {k: {m: float(x) for m, x in v.items()} for k, v in d.get("executors", {}).items()})


@app.command("horizon")
def horizon(
    model: Annotated[str, opt.choice_opt("--model", help="Model.", choices=MODELS, what="model")
                     ] = "qwen2.5-omni",
    gpu: Annotated[str, opt.gpu_opt("--gpu", help="GPU kind (the paper's testbeds).",
                                    allowed=TESTBEDS)] = "RTX6000Ada",
    sweep: Annotated[str, opt.choice_opt(
        "--sweep", help="rate (long fraction 0.3) or long-fraction (rate 0.35).",
        choices=SWEEPS, what="sweep")] = "rate",
    xs: Annotated[str | None, typer.Option("--xs", metavar="X,X,...",
                                           help="Comma-separated x values (default: Figure 8's).")] = None,
    policies: Annotated[str | None, typer.Option(metavar="NAME,NAME,...", help=(
        f"Comma-separated policy names (default: all {len(POLICIES)}: {', '.join(POLICIES)}).")
                        )] = None,
    duration: Annotated[float, opt.duration_opt("--duration", help="Seconds of Poisson arrivals per "
                                                "point.")] = 900.0,
    requests: Annotated[int | None, opt.int_opt(
        "--requests", help="Fixed requests per point (overrides --duration).", lo=10,
        hi=opt.MAX_REQUESTS)] = None,
    seed: Annotated[int, opt.seed_opt("Seed of the arrival stream (same for every policy).")] = 0,
    max_seqs: Annotated[int, opt.int_opt("--max-seqs", help="max_num_seqs of each LLM stage "
                                         "(vLLM-Omni stock: 1).", lo=1, hi=4096)] = 1,
    sm_sweep: Annotated[Path | None, opt.file_opt(
        "--sm-sweep", help="A real fixed-SM sweep (perf sweep format) for S_cap.")] = None,
    first_audio: Annotated[str, opt.choice_opt(
        "--first-audio", help="Speech TTFO at the first audio chunk (talker streams into the "
        "vocoder; the paper's definition) or at the whole utterance (the catalog's hand-over).",
        choices=("chunk", "whole"), what="first-audio definition")] = "chunk",
    token_budget: Annotated[int | None, opt.int_opt(
        "--token-budget", help="max_num_batched_tokens of each LLM stage (default: vLLM's for the "
        "GPU: 2048 below 70 GiB, else 8192).", lo=1, hi=1_000_000)] = None,
    jobs: Annotated[int, opt.int_opt("--jobs", help="Worker processes.", lo=1, hi=256)] = 1,
    figures: Annotated[Path | None, opt.out_dir_opt("--figures", help="Write Figures 8-11 here.")] = None,
    points: Annotated[Path | None, opt.out_opt(
        "--points", help="Keep finished points in this JSONL file and resume from it (default: a "
                         "file in the user's cache folder, named by the sweep's settings and code).")
                      ] = None,
    resume: Annotated[bool, typer.Option(help="Reuse the points a previous run of the same sweep "
                                              "finished.")] = True,
    json_out: Annotated[bool, opt.json_opt()] = False,
) -> None:
    """SLO attainment, per-class p95, shared-stage TPOT, the SM-control trace and the ablation.

    Each finished point is written as it finishes (--points); an interrupted sweep started
    again with the same settings runs only the points it had not finished.
    """
    from omniplane.repro.horizon import experiment as ex

    names = tuple(p.strip() for p in policies.split(",") if p.strip()) if policies else POLICIES
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        fail(f"--policies: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(POLICIES)}")
    values = _floats(xs, "--xs") or (ex.RATES if sweep == "rate" else ex.LONG_FRACTIONS)
    if sweep == "long-fraction" and any(not 0 <= x <= 1 for x in values):
        fail("--xs: long-path fractions must be in [0, 1]")
    if sweep == "rate" and any(not x > 0 for x in values):
        fail("--xs: rates must be > 0")
    sweep_file = str(sm_sweep) if sm_sweep is not None else None
    try:
        testbed = ex.single_gpu(model, gpu, max_seqs, sweep_file, first_audio, token_budget)
    except ValueError as exc:
        fail(f"--sm-sweep: {exc}" if sweep_file else str(exc))
    spec = ex.SweepSpec(model, gpu, sweep, values, names, duration, requests, seed, max_seqs, sweep_file,
                        first_audio, token_budget)
    settings = {"model": model, "gpu": gpu, "sweep": sweep, "xs": values, "policies": names,
                "duration": duration, "requests": requests, "seed": seed, "max_seqs": max_seqs,
                "first_audio": first_audio, "token_budget": token_budget,
                "sm_sweep": sweep_file and Path(sweep_file).read_bytes().hex()}
    key = sweep_key("horizon", settings)
    log = PointLog(points or default_path("horizon", key), key)
    kept = [p for p in (log.load() if resume else [])
            if p.get("policy") in names and _x(sweep, p) in values]
    done = {(p["policy"], _x(sweep, p)): _result(p) for p in kept}
    log.start(kept)
    if done:
        notice(f"resuming: {len(done)} of {len(names) * len(values)} runs already finished in {log.path}")
    t0 = time.perf_counter()
    bar = StderrProgress("horizon")
    bar.start("runs", len(names) * len(values) - len(done))
    finished = [len(done)]

    def keep(r: Any) -> None:
        log.add(_result_json(r))
        finished[0] += 1

    try:
        results = ex.run_sweep(spec, jobs=jobs, progress=lambda: bar.advance(1), done=done, on_result=keep)
    except KeyboardInterrupt:
        notice(f"{finished[0]} of {len(names) * len(values)} runs are kept in {log.path}; the same "
               "command resumes from them")
        raise
    bar.end()
    trace = ex.control_trace(testbed, spec.n_requests(ex.FIG10_RATE), seed) if "horizon" in names else None
    doc = _document(spec, results, testbed, trace, time.perf_counter() - t0)
    doc["meta"]["points_file"] = str(log.path)
    doc["meta"]["resumed_runs"] = len(done)
    if figures is not None:
        with Outputs() as files:
            staged = _write_figures(spec, results, trace, files.folder(figures), testbed.gpu.sms)
            files.commit()
        doc["figures"] = [str(figures / p.name) for p in staged]
    if json_out:
        print_json(doc)
        return
    _print(spec, doc)


def _document(spec: Any, results: Any, testbed: Any, trace: Any, wall: float) -> dict[str, Any]:
    from omniplane.repro.horizon.experiment import sweep_json

    doc = sweep_json(spec, results)
    last = spec.xs[-1]
    at_last = {r.policy: r for r in results if spec.point(last) == (r.rate, r.long_fraction)}
    cal = testbed.calibration
    doc["meta"] = {
        "model": spec.model, "gpu": testbed.gpu.name, "sweep": spec.sweep, "max_num_seqs": spec.max_seqs,
        "first_audio": spec.first_audio, "max_num_batched_tokens": testbed.token_budget,
        "requests_per_point": [spec.n_requests(spec.point(x)[0]) for x in spec.xs], "seed": spec.seed,
        "fixed": {"long_fraction": 0.3} if spec.sweep == "rate" else {"rate": 0.35},
        "slo_s": cal.slo.as_dict(), "slo_source": cal.slo.source, "ladder": list(cal.ladder.levels),
        "s_aggr": cal.ladder.s_aggr, "sweep_source": cal.sweep_source, "wall_s": wall,
        "duration_s": spec.duration_s,
    }
    doc["ci95"] = {name: [1.96 * math.sqrt(max(a * (1 - a), 0.0) / spec.n_requests(spec.point(x)[0]))
                          for x, a in zip(spec.xs, p["attainment"], strict=True)]
                   for name, p in doc["policies"].items()}
    doc["table3"] = {"x": last, "shared_tpot_ms": {n: r.shared_tpot_ms for n, r in at_last.items()}}
    ablation = ("horizon", "no-rotation", "no-sm-throttle")
    doc["ablation"] = {"x": last, "attainment": {n: at_last[n].attainment for n in ablation if n in at_last},
                       "attainment_window": {n: at_last[n].attainment_window for n in ablation
                                             if n in at_last}}
    if trace is not None:
        doc["figure10"] = trace.to_json()
    return doc


def _write_figures(spec: Any, results: Any, trace: Any, out: Path, sms: int) -> list[Path]:
    from omniplane.repro.horizon import figures as fg

    paths = [fg.figure8(spec, results, out), fg.figure9(spec, results, out)]
    if {"horizon", "no-rotation", "no-sm-throttle"} <= set(spec.policies):
        paths.append(fg.figure11(spec, results, out))
    if trace is not None:
        paths.append(fg.figure10(trace, out, sms))
    return paths


def _print(spec: Any, doc: dict[str, Any]) -> None:
    meta = doc["meta"]
    fixed = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in meta["fixed"].items())
    table = Table(title=f"SLO attainment (%, drained / windowed), {meta['model']} on {meta['gpu']}, "
                        f"{spec.sweep} sweep ({fixed}), max_num_seqs {spec.max_seqs}")
    table.add_column("policy")
    for x, n in zip(spec.xs, meta["requests_per_point"], strict=True):
        table.add_column(f"{x:g}\n({n} req)", justify="right")
    for name, p in doc["policies"].items():
        table.add_row(name, *(f"{100 * a:.1f} / {100 * w:.1f}"
                              for a, w in zip(p["attainment"], p["attainment_window"], strict=True)))
    print_table(table)
    console.print(f"drained / windowed (completed within the first {meta['duration_s']:g} s) attainment")
    t3 = Table(title=f"Shared-stage TPOT (ms/token) at {spec.sweep} = {doc['table3']['x']:g}")
    t3.add_column("policy")
    t3.add_column("p50", justify="right")
    t3.add_column("p95", justify="right")
    for name, v in doc["table3"]["shared_tpot_ms"].items():
        t3.add_row(name, f"{v['p50']:.1f}", f"{v['p95']:.1f}")
    print_table(t3)
    if "figure10" in doc:
        f10 = doc["figure10"]
        console.print(f"Figure 10 (rate {f10['rate']}, long fraction {f10['long_fraction']}): "
                      f"corr(B_hat, SM cap) = {f10['correlation']:.3f} over {f10['steps']} steps, "
                      f"{f10['correlation_co_running']:.3f} while co-running; caps used {f10['sm_caps']}")
    for path in doc.get("figures", []):
        console.print(f"wrote {path}")
    resumed = (f", {meta['resumed_runs']} runs resumed from {meta['points_file']}"
               if meta["resumed_runs"] else "")
    console.print(f"{meta['wall_s']:.0f} s{resumed}; 95% binomial half-width per point in --json 'ci95'",
                  highlight=False)
