"""``omniplane calibrate --from FILE``: the co-location model and SM ladder from a GPU check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from omniplane.cli.output import console, fail, print_json


def calibrate(
    source: Annotated[
        Path, typer.Option("--from", help="GPU-check output (scripts/gpu_check.py) or an SM sweep.")
    ],
    out: Annotated[Path | None, typer.Option(help="Write the calibration JSON here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Fit the co-location model (perf's fit) and derive S_min, S_cap and the SM ladder."""
    from omniplane.gpu.calibrate import calibrate as run

    try:
        doc = run(source)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    if out is not None:
        out.write_text(json.dumps(doc, indent=2) + "\n")
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
