"""Fixed-SM sweeps and the fit of the co-location model to them.

Sweep format (JSON; docs/reference/perf.md, "Sweep format")::

    {"kind": "omniplane-sm-sweep", "gpu": "RTX6000Ada", "source": "...",
     "works": {"decode": {"model": "qwen2.5-omni", "component": "thinker",
                          "decode_batch": 8, "decode_context": 4800},
               "stream": {"flops": 0, "bytes": 2e9}},
     "corun_bw_gbs": null,
     "points": [{"sms": 64, "kernel": "decode", "time_ms": 4.80, "corun": false},
                {"sms": 142, "kernel": "decode", "corun": false, "bw_util": 0.76}, ...]}

``works`` names the iteration each ``kernel`` runs: either an LLM iteration of a catalog model
(``model``, ``component``, optional ``runtime`` and the arguments of
:meth:`CostModel.llm_iteration_work`) or explicit per-GPU ``flops`` / ``bytes`` (a synthetic
memory- or compute-bound kernel). A point with ``time_ms`` and/or ``bw_util`` (the GPU's DRAM
draw over its peak) is fitted unless it says ``"check": true``, in which case the fit reports
it beside the model without using it. ``corun`` points run next to the sweep's co-runner,
whose bandwidth demand is ``corun_bw_gbs`` (GB/s) or ``corun_demand`` (a fraction of the GPU's
effective bandwidth) when given, and is fitted otherwise (as a fraction in [0, 1]).

``queueing`` (optional) names kernels whose times are latencies that include queueing for the
stage (a short request's TTFT): ``{"kernels": ["mixed"], "reference_sms": 80}``. Their
prediction is ``t x (1 + rho / (2 (1 - rho)))`` (M/D/1 waiting plus service), the load ``rho``
scaling with the iteration time from its value at ``reference_sms``, which is fitted (a source
that does not publish its load leaves it free).

The fit has the model's parameters (``kappa``, ``delta`` <= HorizonServe's measured bound,
``x0`` and, with a co-running ``bw_util`` point, ``eta_max``; ``x1`` is held at the largest
solo SM level the sweep measured: beyond it no penalty is known), one ``scale`` per kernel (the
sweep's times over the roofline's: it absorbs the roofline's level error and iteration sizes the
source does not publish; only the dependence on SMs and co-running is fitted), the queueing
load, and, without ``corun_bw_gbs``, the co-runner's demand.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
from scipy.optimize import least_squares

from omniplane.perf.colocation import (
    MAX_SOLO_PENALTY,
    ColocationModel,
    ColocationParams,
    default_colocation_path,
)
from omniplane.perf.costmodel import CostModel
from omniplane.perf.factors import Calibration, Efficiency, load_calibration
from omniplane.perf.types import ExecutorConfig, Work
from omniplane.spec import GPUKind, catalog_gpus_path, find_catalog_model, load_gpus, load_model

LLM_ARGS = ("prefill_tokens", "prefill_context", "decode_batch", "decode_context", "prefill_requests")
ETA_MAX_DEFAULT = 0.95  # assumption: DRAM serves at most ~95% of peak under concurrent streams
ETA_MAX_BOUND = 0.95  # the fit may not go above it (no DRAM sustains its datasheet peak)
NEAR_BEST = 1.05  # S_cap: the fewest SMs whose solo decode time is within 5% of the best
# HorizonServe: decode "is already close to saturation in the 64-80 SM range" (of 142) and has
# no point below 64 SMs; kappa is bounded so that 95% of the saturated bandwidth is not reached
# before its first point, 64 of 142 SMs: kappa >= (64 / 142) / ln(20).
KAPPA_MIN = (64.0 / 142.0) / math.log(20.0)


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
    queue_kernels: tuple[str, ...] = ()
    queue_reference_sms: float | None = None


@dataclass(frozen=True)
class ColocationFit:
    params: ColocationParams
    scales: dict[str, float]
    corun_pressure: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    queue_load: float | None = None  # fitted load at the queueing reference SMs

    def to_json(self) -> dict[str, Any]:
        return {"kind": "omniplane-colocation", "params": self.params.to_json(),
                "scales": self.scales, "corun_pressure": self.corun_pressure,
                "queue_load": self.queue_load, "rows": self.rows}


def _bad(file: str, where: str, msg: str) -> ValueError:
    return ValueError(f"{file}: {where}: {msg}")


def _finite(v: Any) -> TypeGuard[int | float]:
    """A real number (not a boolean), finite: NaN and infinities are not measurements."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def read_sweep_json(path: Path) -> Any:
    """A sweep / GPU-check JSON file read through the shared input opener (a regular file under
    the JSON size limit; NaN, Infinity and over-long integers refused, naming the file)."""
    from omniplane.inputs import MAX_JSON_BYTES, json_loads, read_input_text

    text = read_input_text(path, "sweep JSON file", MAX_JSON_BYTES)
    try:
        return json_loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON here: {exc}") from None


def _work(name: str, spec: Any, gpu: GPUKind, cal: Calibration, file: str) -> Work:
    where = f"works.{name}"
    if not isinstance(spec, dict):
        raise _bad(file, where, "expected an object")
    if "model" in spec:
        path = find_catalog_model(str(spec["model"]))
        if path is None:
            raise _bad(file, f"{where}.model", f"unknown catalog model {spec['model']!r}")
        unknown = set(spec) - {"model", "component", "tp", "runtime", *LLM_ARGS}
        if unknown:
            raise _bad(file, where, f"unknown field(s) {sorted(unknown)}; allowed: model, component, "
                                    f"tp, runtime, {', '.join(LLM_ARGS)}")
        try:
            cost = CostModel(load_model(path), calibration=cal, runtime=spec.get("runtime", "vllm"))
        except KeyError as exc:
            raise _bad(file, f"{where}.runtime", str(exc.args[0])) from None
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
        if not _finite(sms) or not 0 < sms <= gpu.sms:
            raise _bad(file, f"{where}.sms", f"expected a number in (0, {gpu.sms}], found {sms!r}")
        t, u = p.get("time_ms"), p.get("bw_util")
        if t is None and u is None:
            raise _bad(file, where, "needs time_ms or bw_util")
        for key, v in (("time_ms", t), ("bw_util", u)):
            if v is not None and (not _finite(v) or v <= 0):
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
        if v is not None and (not _finite(v) or v < 0):
            raise _bad(file, key, f"expected a number >= 0, found {v!r}")
    corun = None
    if bw is not None:
        corun = float(bw) * 1e9
    elif demand is not None:
        corun = float(demand) * gpu.mem_bw * cal.for_gpu(gpu).memory
    q = data.get("queueing")
    kernels: tuple[str, ...] = ()
    ref = None
    if q is not None:
        if not isinstance(q, dict) or not isinstance(q.get("kernels"), list):
            raise _bad(file, "queueing", "expected {\"kernels\": [...], \"reference_sms\": N}")
        kernels = tuple(str(k) for k in q["kernels"])
        bad = [k for k in kernels if k not in works]
        if bad:
            raise _bad(file, "queueing.kernels", f"unknown kernel(s) {bad}; expected some of {sorted(works)}")
        ref = q.get("reference_sms")
        if not _finite(ref) or not 0 < ref <= gpu.sms:
            raise _bad(file, "queueing.reference_sms", f"expected a number in (0, {gpu.sms}], found {ref!r}")
    return Sweep(gpu, works, tuple(points), corun, str(data.get("source", "")), file, kernels,
                 None if ref is None else float(ref))


def load_sweep(path: Path, calibration: Calibration | None = None) -> Sweep:
    return parse_sweep(read_sweep_json(path), str(path), calibration)


def _x1(sweep: Sweep) -> float:
    """The largest solo SM fraction the sweep measured (the penalty is held beyond it)."""
    solo = [p.sms for p in sweep.points if not p.corun and p.time_ms is not None]
    return min(1.0, max(solo) / sweep.gpu.sms) if solo else 1.0


def _queued(t: float, t_ref: float, load: float) -> float:
    rho = min(load * t / t_ref, 0.995)
    return t * (1.0 + rho / (2.0 * (1.0 - rho)))


class _Predictor:
    """Every point's predicted value for one parameter vector."""

    def __init__(self, sweep: Sweep, eff: Efficiency) -> None:
        self.sweep, self.eff = sweep, eff
        self.model = ColocationModel(ColocationParams(0.2, 0.1, 0.5, 0.9, 0.95))

    def values(self, params: ColocationParams, scales: dict[str, float], pressure: float,
               load: float | None) -> list[tuple[SweepPoint, float | None, float | None]]:
        sw, eff, m = self.sweep, self.eff, self.model
        m.params = params
        bw = sw.corun_bw if sw.corun_bw is not None else pressure * sw.gpu.mem_bw * eff.memory
        out: list[tuple[SweepPoint, float | None, float | None]] = []
        for p in sw.points:
            st = m.stage(sw.works[p.kernel], sw.gpu, p.sms, bw if p.corun else 0.0, eff=eff)
            t = st.time_s
            if p.kernel in sw.queue_kernels and load is not None and sw.queue_reference_sms is not None:
                ref = m.stage(sw.works[p.kernel], sw.gpu, sw.queue_reference_sms, bw if p.corun else 0.0,
                              eff=eff).time_s
                t = _queued(t, ref, load)
            out.append((p, scales.get(p.kernel, 1.0) * t * 1e3, st.utilization))
        return out


def _evaluate(sweep: Sweep, eff: Efficiency, params: ColocationParams, scales: dict[str, float],
              pressure: float, load: float | None = None) -> list[dict[str, Any]]:
    """Every point beside the model: (metric, measured, predicted, relative error, role)."""
    rows = []
    for p, t_ms, util in _Predictor(sweep, eff).values(params, scales, pressure, load):
        base = {"sms": p.sms, "kernel": p.kernel, "corun": p.corun, "role": "check" if p.check else "fitted"}
        for metric, measured, pred in (("time_ms", p.time_ms, t_ms), ("bw_util", p.bw_util, util)):
            if measured is not None and pred is not None:
                rows.append({**base, "metric": metric, "measured": measured, "predicted": round(pred, 4),
                             "rel_error": round(pred / measured - 1, 4)})
    return rows


def fit_colocation(sweep: Sweep, calibration: Calibration | None = None) -> ColocationFit:
    """Least squares on log(predicted/measured) of every fitted point over the parameters the
    sweep identifies (module docstring)."""
    eff = (calibration or load_calibration()).for_gpu(sweep.gpu)
    fitted = [p for p in sweep.points if not p.check]
    kernels = sorted({p.kernel for p in fitted if p.time_ms is not None})
    fit_pressure = sweep.corun_bw is None and any(p.corun for p in fitted)
    fit_eta = any(p.corun and p.bw_util is not None for p in fitted)
    fit_load = bool(sweep.queue_kernels) and any(p.kernel in sweep.queue_kernels for p in fitted)
    x1 = _x1(sweep)
    pred = _Predictor(sweep, eff)
    keep = {id(p) for p in fitted}

    names = ["kappa", "delta", "x0"] + (["eta_max"] if fit_eta else []) + [f"scale[{k}]" for k in kernels]
    names += (["co-runner demand"] if fit_pressure else []) + (["queue load"] if fit_load else [])
    x0 = [0.2, 0.1, 0.5 * x1] + ([0.93] if fit_eta else []) + [1.0] * len(kernels)
    x0 += ([0.7] if fit_pressure else []) + ([0.5] if fit_load else [])
    lo = [KAPPA_MIN, 0.0, 0.05] + ([0.5] if fit_eta else []) + [1e-3] * len(kernels)
    lo += ([0.0] if fit_pressure else []) + ([0.0] if fit_load else [])
    hi = [1.0, MAX_SOLO_PENALTY, x1 - 0.01] + ([ETA_MAX_BOUND] if fit_eta else []) + [1e3] * len(kernels)
    hi += ([1.0] if fit_pressure else []) + ([0.99] if fit_load else [])

    def unpack(v: np.ndarray) -> tuple[ColocationParams, dict[str, float], float, float | None]:
        it = iter(float(a) for a in v)
        kappa, delta, x_0 = next(it), next(it), next(it)
        eta = next(it) if fit_eta else ETA_MAX_DEFAULT
        scales = {k: next(it) for k in kernels}
        pressure = next(it) if fit_pressure else 0.0
        load = next(it) if fit_load else None
        return ColocationParams(kappa, min(delta, MAX_SOLO_PENALTY), x_0, x1, eta), scales, pressure, load

    def residuals(v: np.ndarray) -> np.ndarray:
        params, scales, pressure, load = unpack(v)
        out = []
        for p, t_ms, util in pred.values(params, scales, pressure, load):
            if id(p) not in keep:
                continue
            if p.time_ms is not None and t_ms is not None:
                out.append(math.log(t_ms / p.time_ms))
            if p.bw_util is not None and util is not None:
                out.append(math.log(max(util, 1e-9) / p.bw_util))
        return np.array(out)

    res = least_squares(residuals, np.array(x0), bounds=(np.array(lo), np.array(hi)))
    params, scales, pressure, load = unpack(res.x)
    if sweep.corun_bw is not None:
        pressure = sweep.corun_bw / (sweep.gpu.mem_bw * eff.memory)  # given, reported in the same unit
    source = (f"fitted: {len(res.fun)} measurements of {sweep.source or sweep.file} "
              f"(GPU kind {sweep.gpu.name}; {len(names)} parameters: {', '.join(names)}; x1 held at "
              f"{x1:.3f}, the largest solo SM fraction measured"
              + ("" if fit_eta else f"; eta_max held at {ETA_MAX_DEFAULT} (assumption)")
              + f"); {date.today().isoformat()}")
    params = ColocationParams(params.kappa, params.delta, params.x0, params.x1, params.eta_max, source,
                              tuple(f"{p.kernel}@{p.sms:g}{'+corun' if p.corun else ''}" for p in fitted))
    rows = _evaluate(sweep, eff, params, scales, pressure, load)
    return ColocationFit(params, scales, pressure, rows, load)


def save_fit(fit: ColocationFit, path: Path, sweep: Path) -> None:
    doc = {**fit.to_json(), "sweep": sweep.name}
    path.write_text(json.dumps(doc, indent=2) + "\n")


def load_fit(path: Path | None = None) -> tuple[ColocationParams, dict[str, float], float]:
    data = json.loads((path or default_colocation_path()).read_text())
    return (ColocationParams.from_json(data["params"]),
            {str(k): float(v) for k, v in data["scales"].items()}, float(data["corun_pressure"]))


def queue_load(path: Path | None = None) -> float | None:
    """The fitted queueing load of a saved fit (None when its sweep has no queueing kernels)."""
    value = json.loads((path or default_colocation_path()).read_text()).get("queue_load")
    return None if value is None else float(value)
