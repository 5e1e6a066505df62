"""The co-location section of ``omniplane perf validate``: the calibration points beside the
model, and its predictions for every catalog GPU kind."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from omniplane.perf.colocation import ColocationModel, ColocationParams
from omniplane.perf.colocation_fit import (
    NEAR_BEST,
    ColocationFit,
    _evaluate,
    fit_colocation,
    load_fit,
    load_sweep,
    queue_load,
)
from omniplane.perf.costmodel import CostModel
from omniplane.perf.factors import Calibration, load_calibration
from omniplane.perf.types import ExecutorConfig
from omniplane.spec import catalog_gpus_path, find_catalog_model, load_gpus, load_model

REFERENCE = ("qwen2.5-omni", "thinker", 8, 4800)  # model, component, decode batch, decode context


def default_sweep_path() -> Path:
    return Path(str(files("omniplane.repro") / "data" / "horizonserve_fig4.json"))


def refit(sweep: Path | None = None, calibration: Calibration | None = None) -> ColocationFit:
    return fit_colocation(load_sweep(sweep or default_sweep_path(), calibration), calibration)


def per_gpu(params: ColocationParams, pressure: float, calibration: Calibration) -> list[dict[str, Any]]:
    """For every catalog GPU: the reference decode iteration's time against its SM share, solo
    and next to a co-runner of the calibrated pressure."""
    model_name, comp, batch, context = REFERENCE
    path = find_catalog_model(model_name)
    assert path is not None
    cost = CostModel(load_model(path), calibration=calibration, runtime="roofline")
    coloc = ColocationModel(params)
    rows = []
    for gpu in load_gpus(catalog_gpus_path()).gpus:
        cfg = ExecutorConfig(gpu, 1, batch)
        eff = cost.efficiency(cfg)
        work = cost.llm_iteration_work(comp, cfg, decode_batch=batch, decode_context=context)
        corun = pressure * gpu.mem_bw * eff.memory
        solo = {s: coloc.stage(work, gpu, s, eff=eff).time_s for s in range(1, gpu.sms + 1)}
        best = min(solo.values())
        cap = min(s for s, t in solo.items() if t <= NEAR_BEST * best)
        at_cap = coloc.stage(work, gpu, cap, corun, eff=eff)
        full = coloc.stage(work, gpu, gpu.sms, corun, eff=eff)
        peak_bw = max(coloc.stage(work, gpu, s, eff=eff).bandwidth for s in range(1, gpu.sms + 1))
        rows.append({
            "gpu": gpu.name, "sms": gpu.sms, "knee_sms": round(params.knee * gpu.sms, 1), "s_cap": cap,
            "solo_full_ms": round(1e3 * solo[gpu.sms], 3), "solo_best_ms": round(1e3 * best, 3),
            "corun_cap_ms": round(1e3 * at_cap.time_s, 3), "corun_full_ms": round(1e3 * full.time_s, 3),
            "solo_peak_bw_frac": round(peak_bw / gpu.mem_bw, 3),
            "corun_full_util": round(full.utilization, 3),
        })
    return rows


def colocation_rows(calibration: Calibration | None = None) -> dict[str, Any]:
    cal = calibration or load_calibration()
    params, scales, pressure = load_fit()
    load = queue_load()
    sweep = load_sweep(default_sweep_path(), cal)
    eff = cal.for_gpu(sweep.gpu)
    return {
        "params": params.to_json(), "scales": scales, "corun_demand": pressure, "queue_load": load,
        "sweep": sweep.source,
        "points": _evaluate(sweep, eff, params, scales, pressure, load),
        "reference": {"model": REFERENCE[0], "component": REFERENCE[1], "decode_batch": REFERENCE[2],
                      "decode_context": REFERENCE[3]},
        "per_gpu": per_gpu(params, pressure, cal),
    }
