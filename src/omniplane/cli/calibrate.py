"""``omniplane calibrate``: HorizonServe's offline preprocessing (section 4.2).

- ``--run --model M``: measure on this machine's GPU (the SM sweep of the shared stage, the
  co-running sweep, solo latencies per class; ``--dry``: synthetic latencies, no GPU) and derive
  the ladder, S_cap, B_sat and the SLO table;
- ``--from FILE``: the same from a saved measurement (``scripts/gpu_calibrate.py``, ``--run --out``),
  or, for a GPU check's SM sweep (``scripts/gpu_check.py``), the co-location fit and ladder.

``--deploy D.yaml`` writes the result into a deploy config from ``omniplane vllm-omni config``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from omniplane.cli import options as opt
from omniplane.cli.errors import about, fail
from omniplane.cli.files import Outputs, write_json
from omniplane.cli.output import console, err_console, print_json


def calibrate(
    source: Annotated[Path | None, opt.file_opt(
        "--from", help="A saved measurement (scripts/gpu_calibrate.py, calibrate --run --out) or a GPU "
                       "check's SM sweep (scripts/gpu_check.py).")] = None,
    run: Annotated[bool, typer.Option(
        "--run", help="Measure on this machine's GPU (needs --model).")] = False,
    model: Annotated[str | None, opt.option(
        "--model", help="Catalog model to calibrate (default with --from: the one the file names).",
        parser=opt.model_ref(), metavar="MODEL")] = None,
    gpu: Annotated[str | None, opt.gpu_opt(
        "--gpu", help="GPU kind (default: the one the measurement names; needed with --dry).")] = None,
    dry: Annotated[bool, typer.Option(
        "--dry", help="With --run: no GPU, synthetic latencies (marked so), to try the pipeline.")] = False,
    device: Annotated[int, opt.int_opt("--device", help="CUDA device index for --run.")] = 0,
    deploy: Annotated[Path | None, opt.file_opt(
        "--deploy", help="Deploy YAML from vllm-omni config: write the ladder and SLO table into it.")
    ] = None,
    out: Annotated[Path | None, opt.out_opt("--out", help="Write the calibration JSON here.")] = None,
    json_out: Annotated[bool, opt.json_opt()] = False,
) -> None:
    """Derive S_min, S_cap, the SM ladder (and, from a measurement, B_sat and the SLO table)."""
    if run == (source is not None):
        fail("give one of --run (measure here) and --from FILE (a saved measurement)")
    if dry and not run:
        fail("--dry goes with --run")
    if source is not None:
        from omniplane.gpu.preprocess import read
        from omniplane.gpu.sweep import KIND

        try:
            data = read(source)
        except (ValueError, OSError) as exc:
            fail(f"--from {about(source, exc)}")
        if data.get("kind") != KIND:
            if model or deploy:
                fail(f"--from {source}: a GPU check's sweep (kind {data.get('kind')!r}) has no solo "
                     f"latencies: --model/--deploy need a measurement (kind {KIND!r}, "
                     "scripts/gpu_calibrate.py)")
            return _sweep(source, out, json_out)
        doc, where = data, str(source)
    else:
        doc, where = None, "calibrate --run"
    spec, kind = _model(model, gpu, doc)
    if doc is None:
        from omniplane.gpu import GpuUnavailable
        from omniplane.gpu.localrun import run_local

        try:
            doc = run_local(spec, gpu=kind, device=device, dry=dry, log=lambda s: err_console.print(s))
        except GpuUnavailable as exc:
            fail(f"--run: no GPU to calibrate on here: {exc}. Use --dry to try the pipeline, or run "
                 "scripts/gpu_calibrate.py on a GPU machine and calibrate --from its output")
        except ValueError as exc:
            fail(f"--run: {exc}")
    _derived(doc, where, spec, deploy, out, json_out)


def _model(model: str | None, gpu: str | None, doc: dict[str, Any] | None) -> tuple[Any, Any]:
    from omniplane.spec import find_catalog_model, load_gpus, load_model

    name = model or (doc or {}).get("model")
    if not name:
        fail("--model: which catalog model to calibrate (the measurement names none)")
    found = find_catalog_model(str(name))
    if found is None:
        fail(f"--model: {name!r} is not a catalog model")
    gname = gpu or (doc or {}).get("gpu")
    try:
        kind = load_gpus().get(str(gname)) if gname else None
    except KeyError as exc:
        fail(f"--gpu: {exc}")
    return load_model(found), kind


def _derived(doc: dict[str, Any], where: str, spec: Any, deploy: Path | None, out: Path | None,
             json_out: bool) -> None:
    from omniplane.gpu.preprocess import derive

    try:
        cal = derive(doc, spec, where)
    except (ValueError, KeyError, TypeError) as exc:
        fail(f"{where}: {exc}" if not str(exc).startswith(where) else str(exc))
    cal["measurement"] = doc
    with Outputs() as files:
        if out is not None:
            files.json(out, cal)
        if deploy is not None:
            files.text(deploy, _patched(deploy, cal))
        files.commit()
    if json_out:
        print_json(cal)
        return
    if cal["synthetic"]:
        console.print("[yellow]synthetic input: these values are not measurements[/]")
    lad = cal["ladder"]
    console.print(f"{spec.name} on {cal['device']}: S_cap {cal['s_cap']} ({cal['s_cap_rule']})")
    console.print(f"ladder {lad['levels']} (S_min {lad['s_min']}), B_sat {cal['b_sat']}, co-running decode "
                  f"{cal['corun']['at_cap_ms']} ms at S_cap vs {cal['corun']['full_ms']} ms on the whole GPU")
    for c, v in cal["slo_table"]["classes"].items():
        console.print(f"SLO {c}: {v['slo_s']} s (priority {v['priority']}, {v['path']} path)")
    harness = doc.get("harness") or {}
    for name, r in (harness.get("policies") or {}).items():
        console.print(f"harness {name}: thinker TTFT p50 {r.get('ttft_p50_ms')} ms, p95 "
                      f"{r.get('ttft_p95_ms')} ms over {r.get('requests')} requests; talker "
                      f"{r.get('down_steps_per_s')} steps/s")
    if harness.get("error"):
        console.print(f"[yellow]harness: {harness['error']}[/]")
    for path in (out, deploy):
        if path is not None:
            console.print(f"wrote {path}")


def _patched(deploy: Path, cal: dict[str, Any]) -> str:
    import yaml

    from omniplane.vllm.deploy_defaults import apply_calibration
    from omniplane.vllm.stage_config import dump_config

    try:
        text = deploy.read_text()
        cfg = yaml.safe_load(text)
        if not isinstance(cfg, dict):
            raise ValueError("expected a mapping at the top")
        apply_calibration(cfg, cal, str(deploy))
    except (ValueError, OSError, yaml.YAMLError) as exc:
        fail(f"--deploy {about(deploy, exc)}")
    header = [ln[2:] if ln.startswith("# ") else ln[1:] for ln in text.splitlines() if ln.startswith("#")]
    stale = ("Calibrated:", "SM ladder ", "SLO table:")  # what the calibration replaces
    header = [h for h in header if not h.startswith(stale)]
    header += [f"Calibrated: omniplane calibrate{' (SYNTHETIC, not measured)' if cal['synthetic'] else ''}",
               f"SM ladder {cal['ladder']['levels']}: {cal['ladder']['source']}",
               f"SLO table: {cal['slo_table']['source']}"]
    return dump_config(cfg, "\n".join(header))


def _sweep(source: Path, out: Path | None, json_out: bool) -> None:
    """A GPU check's SM sweep: the co-location fit and the ladder."""
    from omniplane.gpu.calibrate import calibrate as run

    try:
        doc = run(source)
    except (ValueError, OSError, KeyError, TypeError) as exc:
        fail(f"--from {about(source, exc)}")
    if out is not None:
        write_json(out, doc)
    if json_out:
        print_json(doc)
        return
    p, lad = doc["params"], doc["ladder"]
    if doc["synthetic"]:
        console.print("[yellow]synthetic input: these values are not measurements[/]")
    console.print(
        f"{doc['gpu']}: kappa {p['kappa']:.3f}, best from x0 {p['x0']:.3f} of the SMs, penalty "
        f"{p['delta']:.3f} by x1 {p['x1']:.3f}, eta_max {p['eta_max']:.3f}, co-runner demand "
        f"{doc['corun_pressure']:.3f}, scales {doc['scales']}"
    )
    console.print(
        f"ladder ({lad['kernel']}): S_min {lad['s_min']}, S_cap {lad['s_cap']}, levels {lad['levels']}"
    )
    worst = max((abs(r["rel_error"]) for r in doc["rows"] if r["role"] == "fitted"), default=0.0)
    console.print(
        f"{len(doc['rows'])} points, worst fitted error {worst:.1%}" + (f"; wrote {out}" if out else "")
    )
