"""``omniplane perf validate|fit|colocation-fit|solo``: the performance model from the shell."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli import options as opt
from omniplane.cli.errors import about, fail
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, print_json, print_table
from omniplane.spec import find_catalog_model, load_gpus, load_model

JsonOpt = Annotated[bool, opt.json_opt()]


TPOpt = Annotated[int | None, opt.tp_opt("GPUs per executor (default: the smallest that fits)")]


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def validate(
    json_out: JsonOpt = False,
    calibration: Annotated[Path | None, opt.file_opt("--calibration",
                                                     help="Calibration file (default: shipped).")] = None,
    transfer: Annotated[bool, typer.Option(help="Also report cross-GPU transfer of the factors.")] = True,
    markdown: Annotated[bool, typer.Option(
        "--markdown", help="Print the Markdown tables docs/results/perf.md quotes.")] = False,
    table3: Annotated[bool, typer.Option(
        help="Also simulate HorizonServe's Table 3 (20 runs, minutes).")] = True,
) -> None:
    """Every public measurement the catalog can express beside the model's prediction, with a
    section per anchor set: Cornfigurator Table 2, the Qwen3-Omni report, vLLM-Omni's CI files,
    HorizonServe Figure 4 and Table 3."""
    from omniplane.perf.factors import load_calibration
    from omniplane.repro.validation.markdown import to_markdown
    from omniplane.repro.validation.report import validate as run

    try:
        cal = load_calibration(calibration) if calibration else None
    except (ValueError, KeyError, TypeError) as exc:
        fail(f"--calibration {calibration}: not a calibration file ({exc})")
    report = run(cal, transfer=transfer)
    if table3:
        from omniplane.repro.horizon.table3 import table3 as run_table3

        report["table3"] = run_table3()
    if json_out:
        print_json(report)
        return
    if markdown:
        sys.stdout.write(to_markdown(report))
        return
    _print_report(report)


def _print_report(report: dict[str, Any]) -> None:
    for role, text in report["split"].items():
        console.print(f"[bold]{role}[/]: {text}")
    summary = Table(title="error summary (|predicted/measured - 1|)")
    for col in ("role", "set", "n", "median", "p90"):
        summary.add_column(col)
    for role, s in report["summary"].items():
        for name, st in [("all", s["all"]), ("excluding anomalous", s["excluding_anomalous"]),
                         *s["by_dataset"].items()]:
            if st.get("n"):
                summary.add_row(role, name, str(st["n"]), f"{st['median_abs_err']:.1%}",
                                f"{st['p90_abs_err']:.1%}")
    print_table(summary)
    table = Table(title="public measurements vs model")
    for col in ("role", "id", "gpu", "measured", "predicted", "error", "flags"):
        table.add_column(col, overflow="fold")
    for p in report["points"]:
        table.add_row(p["role"], p["id"], p["gpu"], f"{p['measured']:.4g} {p['unit']}",
                      f"{p['predicted']:.4g}", _pct(p["rel_error"]), ",".join(p["flags"]))
    print_table(table)
    from omniplane.repro.validation.markdown import (
        report_tables,
        table2_tables,
        table3_tables,
        vllm_omni_ci_tables,
    )

    for lines in (table2_tables(report), report_tables(report), vllm_omni_ci_tables(report),
                  table3_tables(report)):
        if lines:
            console.print("\n".join(lines), highlight=False)
    co = report["colocation"]
    ct = Table(title=f"co-location model vs {co['sweep']}")
    for col in ("kernel", "SMs", "co-run", "metric", "measured", "predicted", "error", "role"):
        ct.add_column(col)
    for r in co["points"]:
        ct.add_row(r["kernel"], f"{r['sms']:g}", str(r["corun"]), r["metric"], f"{r['measured']:g}",
                   f"{r['predicted']:.4g}", _pct(r["rel_error"]), r["role"])
    print_table(ct)
    gt = Table(title="co-location predictions per GPU (Qwen2.5-Omni thinker decode, batch 8)")
    for col in ("gpu", "SMs", "knee", "S_cap", "solo full ms", "solo best ms", "co-run@cap ms",
                "co-run@full ms"):
        gt.add_column(col)
    for r in co["per_gpu"]:
        gt.add_row(r["gpu"], str(r["sms"]), f"{r['knee_sms']:g}", str(r["s_cap"]), f"{r['solo_full_ms']:.2f}",
                   f"{r['solo_best_ms']:.2f}", f"{r['corun_cap_ms']:.2f}", f"{r['corun_full_ms']:.2f}")
    print_table(gt)
    for m in report["not_expressible"]:
        console.print(f"[yellow]not expressible[/] {m['dataset']}: {m['what']} ({m['count']}): {m['reason']}")
    for t in report.get("transfer", []):
        console.print(f"transfer: {t['factors_of']} factors on {t['applied_to']} splitwise points: "
                      f"median {t['median_abs_err']:.1%}, p90 {t['p90_abs_err']:.1%} (n={t['n']})")


def fit(
    out: Annotated[Path | None, opt.out_opt("--out", help="Write the calibration here (default: print it).")
                   ] = None,
) -> None:
    """Fit the roofline's per-kind efficiency factors to the fit points, then each serving
    runtime's host-side factors to the points measured on it (docs/reference/perf.md)."""
    from omniplane.repro.validation.fit import fit_all
    from omniplane.repro.validation.points import Context
    from omniplane.repro.validation.report import all_points

    ctx = Context()
    points, _ = all_points(ctx)
    cal = fit_all(ctx, points, command="omniplane perf fit" + (f" --out {out}" if out else ""))
    if out is None:
        print_json(cal.to_json())
        return
    with Outputs() as files:
        cal.save(files.path(out))
        files.commit()
    console.print(f"wrote {out}")


def colocation_fit(
    sweep: Annotated[Path | None, opt.argument("Sweep JSON (default: HorizonServe Figure 4).",
                                               opt.InputPath(), "SWEEP")] = None,
    out: Annotated[Path | None, opt.out_opt("--out", help="Write the fitted parameters here.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Fit the co-location model to a fixed-SM sweep (docs/reference/perf.md, "Sweep format")."""
    from omniplane.perf.colocation_fit import save_fit
    from omniplane.repro.validation.colocation import default_sweep_path, refit

    path = sweep or default_sweep_path()
    try:
        result = refit(path)
    except (ValueError, OSError, KeyError, TypeError) as exc:
        fail(about(path, exc))
    if out is not None:
        with Outputs() as files:
            save_fit(result, files.path(out), path)
            files.commit()
    if json_out:
        print_json(result.to_json())
        return
    p = result.params
    console.print(f"kappa {p.kappa:.3f}, best at x0 {p.x0:.3f} of the SMs, penalty {p.delta:.3f} by "
                  f"x1 {p.x1:.3f}, eta_max {p.eta_max:.3f}; scales {result.scales}, co-runner demand "
                  f"{result.corun_pressure:.3f} of effective bandwidth")
    for r in result.rows:
        console.print(f"  {r['kernel']}@{r['sms']:g}{' co-run' if r['corun'] else ''} {r['metric']}: "
                      f"measured {r['measured']:g} predicted {r['predicted']:.4g} "
                      f"({_pct(r['rel_error'])}, {r['role']})")


def solo(
    model: Annotated[str, opt.argument("Catalog model name or spec file.", opt.model_ref(), "MODEL")],
    gpu: Annotated[str, opt.gpu_opt("--gpu", help="GPU kind.")],
    tp: TPOpt = None,
    n: Annotated[int, opt.int_opt("--n", help="Sampled requests per type.", lo=1, hi=100_000)] = 200,
    seed: Annotated[int, opt.seed_opt("Sampling seed.")] = 0,
    profiles: Annotated[list[Path] | None, opt.file_opt("--profiles", help="Profile tables to use.")
                        ] = None,
    json_out: JsonOpt = False,
) -> None:
    """p50/p95 first-response latency of each request type alone on one executor config."""
    from omniplane.perf import CostModel, InfeasibleConfig, ProfileSet
    from omniplane.perf.solo import default_solo_config, solo_table

    spec = load_model(find_catalog_model(model) or Path(model))
    kind = load_gpus().get(gpu)
    table = ProfileSet.load(*profiles) if profiles else None
    cost = CostModel(spec, profiles=table)
    try:
        cfg = default_solo_config(spec, cost, kind, tp)
    except InfeasibleConfig as exc:
        fail(f"--tp: {exc}" if tp is not None else str(exc))
    rows = solo_table(spec, cost, cfg, n=n, seed=seed)
    fallbacks = [f.__dict__ for f in cost.fallbacks()]
    doc: dict[str, Any] = {"model": spec.name, "gpu": kind.name, "tp": cfg.tp, "n": n, "seed": seed,
           "executor": [c.name for c in spec.components],
           "types": [{"type": r.type, "metric": r.metric, "p50_ms": round(r.p50 * 1e3, 3),
                      "p95_ms": round(r.p95 * 1e3, 3), "mean_ms": round(r.mean * 1e3, 3)} for r in rows],
           "fallbacks": fallbacks}
    if json_out:
        print_json(doc)
        return
    t = Table(title=f"solo first-response latency: {spec.name} on {kind.name} x{cfg.tp} (n={n}, seed={seed})")
    for col in ("type", "metric", "p50 ms", "p95 ms"):
        t.add_column(col)
    for r in doc["types"]:
        t.add_row(r["type"], r["metric"].upper(), f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}")
    print_table(t)
    if fallbacks:
        console.print(f"[yellow]{len(fallbacks)} queries fell outside the profile grids "
                      "(roofline scaled to the nearest measured point)[/]")


