"""``omniplane experiment horizon``: HorizonServe's experiments (section 6) in simulation."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli.output import console, err_console, fail, print_json

app = typer.Typer(help="Reproduce the papers' experiments in simulation.", no_args_is_help=True)


def _floats(text: str | None, what: str) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        xs = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        fail(f"{what}: expected comma-separated numbers, got {text!r}")
    if not xs:
        fail(f"{what}: expected at least one number")
    return xs


@app.command("horizon")
def horizon(
    model: Annotated[str, typer.Option(help="qwen2.5-omni, mimo-audio or bagel.")] = "qwen2.5-omni",
    gpu: Annotated[str, typer.Option(help="rtx6000ada or rtxpro6000.")] = "rtx6000ada",
    sweep: Annotated[str, typer.Option(help="rate (long fraction 0.3) or long-fraction (rate 0.35).")
                     ] = "rate",
    xs: Annotated[str | None, typer.Option("--xs", help="Comma-separated x values (default: Figure 8's).")
                  ] = None,
    policies: Annotated[str | None, typer.Option(
        help="Comma-separated policy names (default: every factory name).")] = None,
    duration: Annotated[float, typer.Option(help="Seconds of Poisson arrivals per point.")] = 900.0,
    requests: Annotated[int | None, typer.Option(help="Fixed requests per point (overrides --duration).")
                        ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the arrival stream (same for every policy).")] = 0,
    max_seqs: Annotated[int, typer.Option(help="max_num_seqs of each LLM stage (vLLM-Omni stock: 1).")] = 1,
    sm_sweep: Annotated[Path | None, typer.Option(help="A real fixed-SM sweep (perf sweep format) for S_cap.")
                        ] = None,
    jobs: Annotated[int, typer.Option(help="Worker processes.")] = 1,
    figures: Annotated[Path | None, typer.Option("--figures", help="Write Figures 8-11 here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """SLO attainment, per-class p95, shared-stage TPOT, the SM-control trace and the ablation."""
    from omniplane.sched import experiment as ex
    from omniplane.sched.factory import POLICIES

    if model not in ex.MODELS:
        fail(f"--model must be one of {', '.join(ex.MODELS)} (got {model!r})")
    if gpu not in ex.GPUS:
        fail(f"--gpu must be one of {', '.join(ex.GPUS)} (got {gpu!r})")
    if sweep not in ex.SWEEPS:
        fail(f"--sweep must be one of {', '.join(ex.SWEEPS)} (got {sweep!r})")
    names = tuple(p.strip() for p in policies.split(",")) if policies else POLICIES
    unknown = [p for p in names if p not in POLICIES]
    if unknown:
        fail(f"--policies: unknown {unknown}; choose from {', '.join(POLICIES)}")
    values = _floats(xs, "--xs") or (ex.RATES if sweep == "rate" else ex.LONG_FRACTIONS)
    if sweep == "long-fraction" and any(not 0 <= x <= 1 for x in values):
        fail("--xs: long-path fractions must be in [0, 1]")
    if sweep == "rate" and any(not x > 0 for x in values):
        fail("--xs: rates must be > 0")
    if jobs < 1 or max_seqs < 1 or duration <= 0 or (requests is not None and requests < 10):
        fail("need --jobs >= 1, --max-seqs >= 1, --duration > 0 and --requests >= 10")
    sweep_file = str(sm_sweep) if sm_sweep is not None else None
    try:
        testbed = ex.single_gpu(model, gpu, max_seqs, sweep_file)
    except ValueError as exc:
        fail(str(exc))
    spec = ex.SweepSpec(model, gpu, sweep, values, names, duration, requests, seed, max_seqs, sweep_file)
    t0 = time.perf_counter()
    done = [0]
    total = len(names) * len(values)

    def tick() -> None:
        done[0] += 1
        err_console.print(f"  {done[0]}/{total} runs, {time.perf_counter() - t0:.0f} s", highlight=False)

    results = ex.run_sweep(spec, jobs=jobs, progress=None if json_out else tick)
    trace = ex.control_trace(testbed, spec.n_requests(ex.FIG10_RATE), seed) if "horizon" in names else None
    doc = _document(spec, results, testbed, trace, time.perf_counter() - t0)
    if figures is not None:
        doc["figures"] = [str(p) for p in _write_figures(spec, results, trace, figures, testbed.gpu.sms)]
    if json_out:
        print_json(doc)
        return
    _print(spec, doc)


def _document(spec: Any, results: Any, testbed: Any, trace: Any, wall: float) -> dict[str, Any]:
    from omniplane.sched.experiment import sweep_json

    doc = sweep_json(spec, results)
    last = spec.xs[-1]
    at_last = {r.policy: r for r in results if spec.point(last) == (r.rate, r.long_fraction)}
    cal = testbed.calibration
    doc["meta"] = {
        "model": spec.model, "gpu": testbed.gpu.name, "sweep": spec.sweep, "max_num_seqs": spec.max_seqs,
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
    from omniplane.sched import figures as fg

    out.mkdir(parents=True, exist_ok=True)
    paths = [fg.figure8(spec, results, out), fg.figure9(spec, results, out)]
    if {"horizon", "no-rotation", "no-sm-throttle"} <= set(spec.policies):
        paths.append(fg.figure11(spec, results, out))
    if trace is not None:
        paths.append(fg.figure10(trace, out, sms))
    return paths


def _print(spec: Any, doc: dict[str, Any]) -> None:
    meta = doc["meta"]
    table = Table(title=f"SLO attainment (%, drained / windowed), {meta['model']} on {meta['gpu']}, "
                        f"{spec.sweep} sweep ({meta['fixed']}), max_num_seqs {spec.max_seqs}")
    table.add_column("policy")
    for x, n in zip(spec.xs, meta["requests_per_point"], strict=True):
        table.add_column(f"{x:g}\n({n} req)", justify="right")
    for name, p in doc["policies"].items():
        table.add_row(name, *(f"{100 * a:.1f} / {100 * w:.1f}"
                              for a, w in zip(p["attainment"], p["attainment_window"], strict=True)))
    console.print(table)
    console.print(f"drained / windowed (completed within the first {meta['duration_s']:g} s) attainment")
    t3 = Table(title=f"Shared-stage TPOT (ms/token) at {spec.sweep} = {doc['table3']['x']:g}")
    t3.add_column("policy")
    t3.add_column("p50", justify="right")
    t3.add_column("p95", justify="right")
    for name, v in doc["table3"]["shared_tpot_ms"].items():
        t3.add_row(name, f"{v['p50']:.1f}", f"{v['p95']:.1f}")
    console.print(t3)
    if "figure10" in doc:
        f10 = doc["figure10"]
        console.print(f"Figure 10 (rate {f10['rate']}, long fraction {f10['long_fraction']}): "
                      f"corr(B_hat, SM cap) = {f10['correlation']:.3f} over {f10['steps']} steps, "
                      f"{f10['correlation_co_running']:.3f} while co-running; caps used {f10['sm_caps']}")
    for path in doc.get("figures", []):
        console.print(f"wrote {path}")
    console.print(f"{meta['wall_s']:.0f} s; 95% binomial half-width per point in --json 'ci95'")
