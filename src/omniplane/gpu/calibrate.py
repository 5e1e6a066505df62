"""Offline calibration from a GPU check (``scripts/gpu_check.py``): the co-location model fitted
by :func:`omniplane.perf.fit_colocation` (the same fit as ``omniplane perf colocation-fit``) and
the SM ladder HorizonServe's spatial controller uses (section 4.2: ``S_cap`` = the smallest SM
count that reaches near-best time of the memory-bound kernel), derived exactly as the offline
calibration derives it from a simulated sweep (``omniplane.sched.calibration.sweep_ladder``, the
one ladder rule), so the deployed ladder is the simulated one.

The GPU check's file is a fixed-SM sweep in perf's format (docs/reference/perf.md, "Sweep format")
with extra fields the fit ignores (granted SM counts, NVML samples, the ladder backend);
``synthetic: true`` marks a file whose values are not measurements (the shipped example).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omniplane.perf.colocation_fit import NEAR_BEST, Sweep, fit_colocation, parse_sweep
from omniplane.sched.calibration import SweepPoint, gpu_rule, sweep_ladder


def memory_bound_kernel(sweep: Sweep) -> str:
    """The kernel with the most bytes per FLOP (the one whose saturation defines ``S_cap``)."""
    timed = {p.kernel for p in sweep.points if p.time_ms is not None}
    return max(sorted(timed), key=lambda k: sweep.works[k].bytes / max(sweep.works[k].flops, 1.0))


def ladder_from_sweep(
    sweep: Sweep, kernel: str | None = None, near_best: float = NEAR_BEST
) -> dict[str, Any]:
    kernel = kernel or memory_bound_kernel(sweep)
    solo: dict[float, list[float]] = {}
    for p in sweep.points:
        if p.kernel == kernel and not p.corun and p.time_ms is not None:
            solo.setdefault(p.sms, []).append(p.time_ms)
    if not solo:
        raise ValueError(f"{sweep.file}: points: no solo time of kernel {kernel!r} to derive S_cap from")
    times = {s: min(v) for s, v in solo.items()}
    best = min(times.values())
    points = tuple(SweepPoint(int(s), t / 1e3) for s, t in times.items())
    ladder = sweep_ladder(points, sweep.gpu.sms, gpu_rule(sweep.gpu), tolerance=near_best - 1.0)
    return {
        "kernel": kernel,
        "s_min": ladder.s_min,
        "s_cap": ladder.s_cap,
        "levels": list(ladder.levels),
        "best_ms": best,
        "near_best": near_best,
        "source": f"derived: fewest SMs with {kernel} within {near_best - 1:.0%} of its best solo time "
        f"({best:.4g} ms) in {sweep.file}",
    }


def calibrate(path: Path) -> dict[str, Any]:
    """The calibration document for a GPU-check file: perf's co-location fit (loadable by
    ``omniplane.perf.colocation_fit.load_fit``) plus the ladder and provenance."""
    from omniplane.perf.colocation_fit import read_sweep_json

    data = read_sweep_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object (a GPU check / sweep file)")
    sweep = parse_sweep(data, str(path))
    fit = fit_colocation(sweep)
    return {
        **fit.to_json(),
        "sweep": path.name,
        "gpu": sweep.gpu.name,
        "synthetic": bool(data.get("synthetic")),
        "ladder": ladder_from_sweep(sweep),
        "device": data.get("device"),
        "backend": data.get("ladder_backend"),
    }
