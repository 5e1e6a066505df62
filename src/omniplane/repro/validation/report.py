"""``omniplane perf validate``: every public point beside the model's prediction and error.

Points are split by role: ``fit`` (used to fit the efficiency factors), ``held-out`` (never used
to fit anything) and ``colocation-calibration`` (HorizonServe's Figure 4 points, which the
co-location model is fitted to). Nothing is dropped: flagged points are listed and counted, and
the medians are given with and without the points flagged anomalous.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from omniplane.perf.factors import Calibration, load_calibration
from omniplane.repro.validation.anchors import report_points, report_section, table2_points, table2_section
from omniplane.repro.validation.colocation import colocation_rows
from omniplane.repro.validation.external_sources import external_section
from omniplane.repro.validation.fit import fit_calibration
from omniplane.repro.validation.points import Context, NotExpressible, Point, Role
from omniplane.repro.validation.published import published_points
from omniplane.repro.validation.splitwise import splitwise_points
from omniplane.repro.validation.vidur import vidur_points
from omniplane.repro.validation.vllm_omni_audio import audio_section
from omniplane.repro.validation.vllm_omni_ci import RUNTIME as CI_RUNTIME
from omniplane.repro.validation.vllm_omni_ci import ci_section


@dataclass(frozen=True)
class Row:
    point: Point
    predicted: float

    @property
    def error(self) -> float:
        """Relative error of the prediction: predicted / measured - 1."""
        return self.predicted / self.point.measured - 1.0

    def to_json(self) -> dict[str, Any]:
        p = self.point
        return {"id": p.id, "dataset": p.dataset, "role": p.role.value, "gpu": p.gpu,
                "description": p.description, "unit": p.unit, "measured": p.measured,
                "predicted": round(self.predicted, 6), "rel_error": round(self.error, 4),
                "flags": [f.value for f in p.flags], "note": p.note, "source": p.source}


def all_points(ctx: Context) -> tuple[list[Point], list[NotExpressible]]:
    sw, sw_missing = splitwise_points(ctx)
    pub, pub_missing = published_points(ctx)
    return ([*sw, *vidur_points(ctx), *pub, *table2_points(ctx), *report_points(ctx)],
            [*sw_missing, *pub_missing])


def evaluate(ctx: Context, points: Sequence[Point], calibration: Calibration) -> list[Row]:
    models = ctx.models(calibration)
    return [Row(p, p.predict(models)) for p in points]


def summary(rows: Sequence[Row]) -> dict[str, Any]:
    """Median and 90th-percentile absolute relative error, with and without excluded points."""
    def stats(rs: Sequence[Row]) -> dict[str, Any]:
        errs = sorted(abs(r.error) for r in rs)
        if not errs:
            return {"n": 0}
        return {"n": len(errs), "median_abs_err": round(statistics.median(errs), 4),
                "p90_abs_err": round(errs[min(len(errs) - 1, int(0.9 * len(errs)))], 4)}

    kept = [r for r in rows if not r.point.excluded]
    by_dataset: dict[str, list[Row]] = defaultdict(list)
    for r in kept:
        by_dataset[r.point.dataset].append(r)
    return {"all": stats(rows), "excluding_anomalous": stats(kept),
            "by_dataset": {d: stats(rs) for d, rs in sorted(by_dataset.items())}}


def transfer_check(ctx: Context, points: Sequence[Point]) -> list[dict[str, Any]]:
    """How well one GPU kind's factors predict another kind's fit-set points: the error to
    expect on a GPU kind the calibration has no measurements for."""
    fit = [p for p in points if p.role is Role.FIT and not p.excluded]
    out = []
    kinds = sorted({p.gpu for p in fit})
    for src in kinds:
        cal = fit_calibration(ctx, [p for p in fit if p.gpu == src])
        for dst in kinds:
            if dst == src:
                continue
            target = [p for p in points if p.gpu == dst and p.dataset == "splitwise" and not p.excluded]
            moved = Calibration({dst: cal.entry(src)}, cal.entry(src))
            rows = evaluate(ctx, target, moved)
            out.append({"factors_of": src, "applied_to": dst, **summary(rows)["excluding_anomalous"]})
    return out


def validate(calibration: Calibration | None = None, *, transfer: bool = True) -> dict[str, Any]:
    """The whole report as one JSON-ready document."""
    ctx = Context()
    cal = calibration or load_calibration()
    points, missing = all_points(ctx)
    rows = evaluate(ctx, points, cal)
    coloc = colocation_rows()
    report: dict[str, Any] = {
        "calibration": {"created": cal.created, "command": cal.command,
                        "kinds": {k: v.source for k, v in cal.kinds.items()},
                        "default": cal.default.source},
        "split": {
            "fit": "Splitwise llama2-70b on A100-80GB and H100-SXM (TP 2/4/8, prefill and decode)",
            "runtime-fit": "Cornfigurator Table 2 (cornserve runtime); Qwen3-Omni report per-component "
                           "table (vllm runtime); vLLM-Omni CI ceilings, split fit (vllm-v1 runtime)",
            "held-out": "Splitwise bloom-176b; Vidur Llama-2-7B operators; sglang Qwen-Image, FLUX.1-dev; "
                        "Qwen3-Omni report RTF; BAGEL",
            "colocation-calibration": "HorizonServe Figure 4 (RTX 6000 Ada, Qwen2.5-Omni thinker)",
        },
        "summary": {role.value: summary([r for r in rows if r.point.role is role])
                    for role in (Role.FIT, Role.RUNTIME, Role.HELD_OUT)},
        "points": [r.to_json() for r in rows],
        "table2": table2_section([r.to_json() for r in rows]),
        "qwen3_omni_report": report_section([r.to_json() for r in rows]),
        "vllm_omni_ci": ci_section(ctx, cal) if CI_RUNTIME in cal.runtimes else None,
        "vllm_omni_ci_audio": audio_section(ctx, cal) if CI_RUNTIME in cal.runtimes else None,
        "external_sources": external_section(ctx, cal),
        "colocation": coloc,
        "not_expressible": [m.__dict__ for m in missing],
    }
    if transfer:
        report["transfer"] = transfer_check(ctx, points)
    return report
