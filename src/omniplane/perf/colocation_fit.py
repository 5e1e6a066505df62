"""Fixed-SM sweeps and the fit of the co-location model to them.

Sweep format (JSON; docs/perf.md)::

    {"kind": "omniplane-sm-sweep", "gpu": "RTX6000Ada", "source": "...",
     "works": {"decode": {"model": "qwen2.5-omni", "component": "thinker",
                          "decode_batch": 8, "decode_context": 4800},
               "stream": {"flops": 0, "bytes": 2e9}},
     "corun_bw_gbs": null,
     "points": [{"sms": 64, "kernel": "decode", "time_ms": 4.80, "corun": false},
                {"sms": 142, "kernel": "decode", "corun": false, "bw_util": 0.76}, ...]}

``works`` names the iteration each ``kernel`` runs: either an LLM iteration of a catalog model
(``model``, ``component`` and the arguments of :meth:`CostModel.llm_iteration_work`) or explicit
per-GPU ``flops`` / ``bytes`` (a synthetic memory- or compute-bound kernel). A point with
``time_ms`` and/or ``bw_util`` (the DRAM busy fraction) is fitted unless it says
``"check": true``, in which case the fit reports it beside the model without using it.
``corun`` points run next to the sweep's co-runner, whose bandwidth demand is ``corun_bw_gbs``
(GB/s) or ``corun_demand`` (a fraction of the GPU's effective bandwidth) when given, and is
fitted otherwise (as a fraction in [0, 1]).

The fit has the two model parameters (``knee``, ``thrash``), one ``scale`` per kernel (the
sweep's times over the roofline's: it absorbs the roofline's level error and iteration sizes the
source does not publish; only the dependence on SMs and co-running is fitted) and, without
``corun_bw_gbs``, the co-runner's demand.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from omniplane.perf.colocation import ColocationModel, ColocationParams
from omniplane.perf.costmodel import CostModel
from omniplane.perf.factors import Calibration, Efficiency, load_calibration
from omniplane.perf.types import ExecutorConfig, Work
from omniplane.spec import GPUKind, catalog_gpus_path, find_catalog_model, load_gpus, load_model

LLM_ARGS = ("prefill_tokens", "prefill_context", "decode_batch", "decode_context", "prefill_requests")


@dataclass(frozen=True)
class SweepPoint:
    sms: float
    kernel: str
    corun: bool
    time_ms: float | None
    bw_util: float | None
    check: bool = False


@dataclass(frozen=True)
class Sweep:
    gpu: GPUKind
    works: dict[str, Work]
    points: tuple[SweepPoint, ...]
    corun_bw: float | None  # bytes/s, when known
    source: str
    file: str = "<sweep>"


@dataclass(frozen=True)
class ColocationFit:
    params: ColocationParams
    scales: dict[str, float]
    corun_pressure: float
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "omniplane-colocation", "params": self.params.to_json(),
                "scales": self.scales, "corun_pressure": self.corun_pressure, "rows": self.rows}


def _bad(file: str, where: str, msg: str) -> ValueError:
    return ValueError(f"{file}: {where}: {msg}")


def _work(name: str, spec: Any, gpu: GPUKind, cal: Calibration, file: str) -> Work:
    where = f"works.{name}"
    if not isinstance(spec, dict):
        raise _bad(file, where, "expected an object")
    if "model" in spec:
        path = find_catalog_model(str(spec["model"]))
        if path is None:
            raise _bad(file, f"{where}.model", f"unknown catalog model {spec['model']!r}")
        unknown = set(spec) - {"model", "component", "tp", *LLM_ARGS}
        if unknown:
            raise _bad(file, where, f"unknown field(s) {sorted(unknown)}; allowed: model, component, "
                                    f"tp, {', '.join(LLM_ARGS)}")
        cost = CostModel(load_model(path), calibration=cal)
        cfg = ExecutorConfig(gpu, int(spec.get("tp", 1)))
        return cost.llm_iteration_work(str(spec.get("component", "")), cfg,
                                       **{k: int(spec[k]) for k in LLM_ARGS if k in spec})
    try:
        return Work(float(spec.get("flops", 0.0)), float(spec.get("bytes", 0.0)),
                    float(spec.get("overhead_s", 0.0)), 0.0)
    except (TypeError, ValueError):
        raise _bad(file, where, "flops, bytes and overhead_s must be numbers") from None


def parse_sweep(data: dict[str, Any], file: str = "<sweep>", calibration: Calibration | None = None) -> Sweep:
    if data.get("kind") != "omniplane-sm-sweep":
        raise _bad(file, "kind", "expected 'omniplane-sm-sweep'")
    cal = calibration or load_calibration()
    try:
        gpu = load_gpus(catalog_gpus_path()).get(str(data.get("gpu")))
    except KeyError as exc:
        raise _bad(file, "gpu", str(exc.args[0])) from None
    works = {n: _work(n, s, gpu, cal, file) for n, s in dict(data.get("works", {})).items()}
    points = []
    for i, p in enumerate(data.get("points", [])):
        where = f"points[{i}]"
        if not isinstance(p, dict):
            raise _bad(file, where, "expected an object")
        if p.get("kernel") not in works:
            raise _bad(file, f"{where}.kernel", f"expected one of {sorted(works)}, found {p.get('kernel')!r}")
        sms = p.get("sms")
        if not isinstance(sms, int | float) or not 0 < sms <= gpu.sms:
            raise _bad(file, f"{where}.sms", f"expected a number in (0, {gpu.sms}], found {sms!r}")
        t, u = p.get("time_ms"), p.get("bw_util")
        if t is None and u is None:
            raise _bad(file, where, "needs time_ms or bw_util")
        for key, v in (("time_ms", t), ("bw_util", u)):
            if v is not None and (not isinstance(v, int | float) or v <= 0):
                raise _bad(file, f"{where}.{key}", f"expected a number > 0, found {v!r}")
        points.append(SweepPoint(float(sms), str(p["kernel"]), bool(p.get("corun", False)),
                                 None if t is None else float(t), None if u is None else float(u),
                                 bool(p.get("check", False))))
    if not any(p.time_ms is not None and not p.check for p in points):
        raise _bad(file, "points", "no fitted point has time_ms: nothing to fit")
    bw = data.get("corun_bw_gbs")
    demand = data.get("corun_demand")
    if bw is not None and demand is not None:
        raise _bad(file, "corun_demand", "give corun_bw_gbs or corun_demand, not both")
    for key, v in (("corun_bw_gbs", bw), ("corun_demand", demand)):
        if v is not None and (not isinstance(v, int | float) or v < 0):
            raise _bad(file, key, f"expected a number >= 0, found {v!r}")
    corun = None
    if bw is not None:
        corun = float(bw) * 1e9
    elif demand is not None:
        corun = float(demand) * gpu.mem_bw * cal.for_gpu(gpu).memory
    return Sweep(gpu, works, tuple(points), corun, str(data.get("source", "")), file)


def load_sweep(path: Path, calibration: Calibration | None = None) -> Sweep:
    return parse_sweep(json.loads(path.read_text()), str(path), calibration)


def _evaluate(sweep: Sweep, eff: Efficiency, params: ColocationParams, scales: dict[str, float],
              pressure: float) -> list[dict[str, Any]]:
    """Every point beside the model: (metric, measured, predicted, relative error, role)."""
    model = ColocationModel(params)
    cap = sweep.gpu.mem_bw * eff.memory
    corun_bw = sweep.corun_bw if sweep.corun_bw is not None else pressure * cap
    rows = []
    for p in sweep.points:
        st = model.stage(sweep.works[p.kernel], sweep.gpu, p.sms, corun_bw if p.corun else 0.0, eff=eff)
        base = {"sms": p.sms, "kernel": p.kernel, "corun": p.corun, "role": "check" if p.check else "fitted"}
        for metric, measured, pred in (("time_ms", p.time_ms, scales.get(p.kernel, 1.0) * st.time_s * 1e3),
                                       ("bw_util", p.bw_util, st.utilization)):
            if measured is not None:
                rows.append({**base, "metric": metric, "measured": measured, "predicted": round(pred, 4),
                             "rel_error": round(pred / measured - 1, 4)})
    return rows


def fit_colocation(sweep: Sweep, calibration: Calibration | None = None) -> ColocationFit:
    """Least squares on log(predicted/measured) of every fitted point over knee, thrash, one
    scale per timed kernel and (when the sweep does not give it) the co-runner's demand."""
    eff = (calibration or load_calibration()).for_gpu(sweep.gpu)
    fitted = [p for p in sweep.points if not p.check]
    kernels = sorted({p.kernel for p in fitted if p.time_ms is not None})
    fit_pressure = sweep.corun_bw is None and any(p.corun for p in fitted)
    model = ColocationModel(ColocationParams(0.5, 0.0))
    cap = sweep.gpu.mem_bw * eff.memory

    def unpack(x: np.ndarray) -> tuple[ColocationParams, dict[str, float], float]:
        scales = {k: float(x[2 + i]) for i, k in enumerate(kernels)}
        return (ColocationParams(float(x[0]), float(x[1])), scales,
                float(x[-1]) if fit_pressure else 0.0)

    def residuals(x: np.ndarray) -> np.ndarray:
        params, scales, pressure = unpack(x)
        model.params = params
        bw = sweep.corun_bw if sweep.corun_bw is not None else pressure * cap
        out = []
        for p in fitted:
            st = model.stage(sweep.works[p.kernel], sweep.gpu, p.sms, bw if p.corun else 0.0, eff=eff)
            if p.time_ms is not None:
                out.append(math.log(scales[p.kernel] * st.time_s * 1e3 / p.time_ms))
            if p.bw_util is not None:
                out.append(math.log(max(st.utilization, 1e-9) / p.bw_util))
        return np.array(out)

    x0 = [0.5, 0.3] + [1.0] * len(kernels) + ([0.5] if fit_pressure else [])
    lo = [0.05, 0.0] + [1e-3] * len(kernels) + ([0.0] if fit_pressure else [])
    hi = [1.0, 50.0] + [1e3] * len(kernels) + ([1.0] if fit_pressure else [])
    res = least_squares(residuals, np.array(x0), bounds=(np.array(lo), np.array(hi)))
    params, scales, pressure = unpack(res.x)
    if sweep.corun_bw is not None:
        pressure = sweep.corun_bw / cap  # given by the sweep, reported in the same unit
    names = ["knee", "thrash", *(f"scale[{k}]" for k in kernels)]
    names += ["co-runner demand"] if fit_pressure else []
    source = (f"fitted: {len(res.fun)} measurements of {sweep.source or sweep.file} "
              f"(GPU kind {sweep.gpu.name}; {len(names)} parameters: {', '.join(names)}); "
              f"{date.today().isoformat()}")
    params = ColocationParams(params.knee, params.thrash, source,
                              tuple(f"{p.kernel}@{p.sms:g}{'+corun' if p.corun else ''}" for p in fitted))
    return ColocationFit(params, scales, pressure, _evaluate(sweep, eff, params, scales, pressure))
