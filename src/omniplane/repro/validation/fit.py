"""Fit the roofline's per-kind efficiency factors to the ``fit`` points (``omniplane perf fit``).

For every GPU kind with fit points, a bounded least-squares fit of the six factors of
:class:`Efficiency` to the log of measured/predicted times (relative errors weigh a 50 ms decode
step and a 5 s prefill alike). Kinds without measurements get an explicit rule (same silicon as a
fitted kind, or the geometric mean of the fitted kinds), stated in the written file.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from datetime import date

import numpy as np
from scipy.optimize import least_squares

from omniplane.perf.factors import FACTOR_FIELDS, Calibration, Efficiency, KindFactors
from omniplane.perf.roofline import KERNELS_PER_LAYER
from omniplane.repro.validation.points import Context, Point, Role

# The fitted factors, their bounds and starting point.
FITTED = ("compute", "memory", "per_seq_s", "allreduce_s", "link")
LOWER = (0.05, 0.05, 0.0, 0.0, 0.01)
UPPER = (1.0, 1.0, 0.01, 1e-3, 1.0)
START = (0.6, 0.7, 1e-4, 3e-5, 0.2)

# Factors held fixed because the fit set cannot identify them: every Splitwise point runs at
# TP >= 2, where the per-layer fixed time and the per-layer all-reduce latency are confounded.
FIXED: dict[str, tuple[float, str]] = {
    "layer_s": (30e-6, f"assumption: ~{KERNELS_PER_LAYER} kernels per transformer layer at ~2 us of "
                       "launch gap and tail each under CUDA-graph replay; not identifiable from the "
                       "fit set, where every point runs at TP >= 2"),
}

# Kinds without their own measurements: (kind, same-silicon kind or None for the geometric mean, why)
INHERIT: tuple[tuple[str, str | None, str], ...] = (
    ("H200", "H100-SXM", "assumption: H200 is H100 silicon (same 132 SMs, clocks and NVLink) with "
                         "faster HBM3e; the factors are fractions of peak, so H100-SXM's carry over"),
)


def _efficiency(x: Sequence[float]) -> Efficiency:
    values = {f: v for f, (v, _) in FIXED.items()}
    values.update(zip(FITTED, (float(v) for v in x), strict=True))
    return Efficiency.from_vector([values[f] for f in FACTOR_FIELDS])


def _placeholder() -> KindFactors:
    return KindFactors("default", _efficiency(START), "assumption: fit start")


def fit_kind(ctx: Context, gpu: str, points: Sequence[Point]) -> KindFactors:
    """Factors of one GPU kind fitted to ``points`` (all on that kind, none excluded)."""
    pts = [p for p in points if not p.excluded]
    measured = np.array([p.measured for p in pts])

    def residuals(x: np.ndarray) -> np.ndarray:
        cal = Calibration({gpu: KindFactors(gpu, _efficiency(list(x)), "trial")},
                          _placeholder())
        models = ctx.models(cal)
        pred = np.array([p.predict(models) for p in pts])
        return np.asarray(np.log(pred / measured))

    res = least_squares(residuals, np.array(START), bounds=(np.array(LOWER), np.array(UPPER)),
                        x_scale=np.array(START), method="trf")
    eff = _efficiency(list(res.x))
    err = float(np.median(np.abs(np.exp(res.fun) - 1.0)))
    datasets = sorted({p.dataset for p in pts})
    source = (f"fitted: {len(pts)} {'/'.join(datasets)} points on {gpu} "
              f"({', '.join(sorted({p.description.split(':')[0] for p in pts}))}); "
              "bounded least squares on log(predicted/measured)")
    fixed = {f: why for f, (_, why) in FIXED.items()}
    return KindFactors(gpu, eff, source, tuple(p.id for p in pts), err, fixed)


def fit_calibration(ctx: Context, points: Sequence[Point], command: str = "omniplane perf fit",
                    created: str | None = None) -> Calibration:
    """Fit every kind that has ``fit`` points; derive the others (see :data:`INHERIT`)."""
    fit_points = [p for p in points if p.role is Role.FIT]
    kinds: dict[str, KindFactors] = {}
    for gpu in sorted({p.gpu for p in fit_points}):
        kinds[gpu] = fit_kind(ctx, gpu, [p for p in fit_points if p.gpu == gpu])
    fitted = list(kinds.values())
    mean = _efficiency([
        math.exp(statistics.fmean(math.log(max(getattr(k.efficiency, f), 1e-12)) for k in fitted))
        for f in FITTED
    ])
    fixed = {f: why for f, (_, why) in FIXED.items()}
    default = KindFactors("default", mean,
                          "assumption: geometric mean of the fitted kinds ("
                          + ", ".join(k.gpu for k in fitted) + ") for GPU kinds without measurements",
                          factor_sources=fixed)
    for name, parent, why in INHERIT:
        if parent in kinds:
            kinds[name] = KindFactors(name, kinds[parent].efficiency, why, factor_sources=fixed)
    return Calibration(kinds, default, created or date.today().isoformat(), command,
                       ("Per-kind roofline factors and serving runtimes; docs/reference/perf.md "
                        "explains each factor and the split of public measurements into fit and "
                        "held-out points.",))


DEFAULT_RUNTIME = "cornserve"  # what the planner prices with: the stack Table 2 was measured on


def fit_all(ctx: Context, points: Sequence[Point], command: str = "omniplane perf fit",
            created: str | None = None) -> Calibration:
    """The efficiency factors (Splitwise), then each runtime's host-side factors on them."""
    from omniplane.repro.validation.runtime_fit import BASE, fit_runtime

    cal = fit_calibration(ctx, points, command, created)
    vllm = fit_runtime(ctx, points, cal, BASE["vllm"])
    cal = cal.with_runtime(vllm)
    # Cornserve runs the same vLLM engine loop (eagerly): its per-iteration host time is vLLM's
    corn = BASE["cornserve"].with_factors(
        step_s=vllm.step_s, factor_sources={**BASE["cornserve"].factor_sources,
                                            "step_s": "held: the vllm runtime's fitted step_s (the same "
                                                      "vLLM engine loop per iteration)"})
    cal = cal.with_runtime(fit_runtime(ctx, points, cal, corn))
    # vLLM v1 as vLLM-Omni's CI runs it: fitted to the CI's ceilings (repro/data/vllm_omni_ci.json)
    from omniplane.repro.validation.vllm_omni_audio import fit_talker
    from omniplane.repro.validation.vllm_omni_ci import RUNTIME as V1
    from omniplane.repro.validation.vllm_omni_ci import fit_v1

    cal = cal.with_runtime(fit_v1(ctx, cal))
    # then its talker (one factor) to the CI's audio-output runs, the thinker's factors held
    cal = cal.with_runtime(fit_talker(ctx, cal, cal.runtime(V1)))
    return Calibration(cal.kinds, cal.default, cal.created, cal.command, cal.notes, cal.runtimes,
                       DEFAULT_RUNTIME)
