"""``omniplane calibrate --from FILE``: the co-location model and SM ladder from a GPU check."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from omniplane.cli import options as opt
from omniplane.cli.errors import about, fail
from omniplane.cli.files import write_json
from omniplane.cli.output import console, print_json


def calibrate(
    source: Annotated[Path, opt.file_opt(
        "--from", help="GPU-check output (scripts/gpu_check.py) or an SM sweep.")],
    out: Annotated[Path | None, opt.out_opt("--out", help="Write the calibration JSON here.")] = None,
    json_out: Annotated[bool, opt.json_opt()] = False,
) -> None:
    """Fit the co-location model (perf's fit) and derive S_min, S_cap and the SM ladder."""
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
