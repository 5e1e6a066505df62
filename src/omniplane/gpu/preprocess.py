"""HorizonServe's offline preprocessing (section 4.2) from a GPU calibration document
(:mod:`omniplane.gpu.sweep`, written by ``omniplane calibrate --run`` or
``scripts/gpu_calibrate.py``): what the deploy config needs.

- **S_cap**: the smallest swept SM count whose solo shared-stage decode time is within 5% of the
  sweep's best ("the smallest SM count that reaches near-best decode TPOT"; the best lies below
  the full-allocation degradation, so the smallest near-best count does too), and **S_min** the
  fewest within 10%: :func:`omniplane.sched.calibration.sweep_ladder`, the one ladder rule of the
  simulated and the deployed ladder, on the partition rule the document reports.
- **B_sat**: the largest memory-activity fraction read while the stages co-ran at a ladder level
  (the saturation pressure Equation 1 normalises by); none when no signal was read.
- **SLO table**: ``Delta_c = 5 x p95_solo(c)`` (section 6.1) per request type, grouped into the
  output classes vLLM-Omni names (:func:`class_table`: a class takes its types' largest p95).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omniplane.gpu.sweep import KIND
from omniplane.sched.calibration import (
    S_MIN_SLOWDOWN,
    SCAP_TOLERANCE,
    SLO_MULTIPLIER,
    SweepPoint,
    choose_s_cap,
    sweep_ladder,
)
from omniplane.sched.ladder import PartitionRule
from omniplane.spec import ModelSpec, PathClass


def _num(where: str, v: Any, *, positive: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or (positive and v <= 0):
        raise ValueError(f"{where}: expected a {'positive ' if positive else ''}number, got {v!r}")
    return float(v)


def _points(where: str, rows: Any) -> tuple[SweepPoint, ...]:
    if not isinstance(rows, list) or len(rows) < 2:
        raise ValueError(f"{where}: expected a list of at least 2 points {{sms, time_ms}}")
    pts = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ValueError(f"{where}[{i}]: expected a mapping {{sms, time_ms}}")
        sms = _num(f"{where}[{i}].sms", r.get("sms"))
        pts.append(SweepPoint(int(sms), _num(f"{where}[{i}].time_ms", r.get("time_ms")) / 1e3))
    return tuple(sorted(pts, key=lambda p: p.sms))


def p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile."""
    xs = sorted(values)
    return xs[max(0, math.ceil(0.95 * len(xs)) - 1)]


def class_table(model: ModelSpec, p95_s: Mapping[str, float],
                multiplier: float = SLO_MULTIPLIER) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(classes of an ``omniplane-slo-table``, the request type that sets each class's SLO): one
    class per output modality of ``model``'s request types, with their vLLM priority and path,
    ``slo_s = multiplier x`` the largest p95 of the class's types."""
    members: dict[str, list[str]] = {}
    for t in model.type_names:
        members.setdefault(model.request_type(t).output.value, []).append(t)
    classes: dict[str, dict[str, Any]] = {}
    worst_of: dict[str, str] = {}
    for cls, types in members.items():
        rts = [model.request_type(t) for t in types]
        prios = {rt.priority for rt in rts if rt.priority is not None}
        if len(prios) > 1:
            raise ValueError(f"{model.name}: request types {types} (output {cls}) carry different vLLM "
                             f"priorities {sorted(prios)}; one class needs one priority")
        if not prios:
            raise ValueError(f"{model.name}: no vLLM priority for the request types of class {cls} "
                             "(set priority: in the model's request_types)")
        worst = max(types, key=lambda t: p95_s[t])
        long = any(rt.path_class is PathClass.LONG for rt in rts)
        classes[cls] = {"priority": prios.pop(), "path": (PathClass.LONG if long else PathClass.SHORT).value,
                        "slo_s": round(multiplier * p95_s[worst], 4)}
        worst_of[cls] = worst
    return classes, worst_of


def derive(doc: Mapping[str, Any], model: ModelSpec, where: str = "calibration", *,
           tolerance: float = SCAP_TOLERANCE, slowdown: float = S_MIN_SLOWDOWN,
           multiplier: float = SLO_MULTIPLIER) -> dict[str, Any]:
    """The calibration (module docstring) of one document for ``model``."""
    if doc.get("kind") != KIND:
        raise ValueError(f"{where}: kind: expected {KIND!r}, got {doc.get('kind')!r}")
    if doc.get("model") not in (None, model.name):
        raise ValueError(f"{where}: model: the measurements are of {doc.get('model')!r}, calibrating "
                         f"{model.name!r}")
    total = int(_num(f"{where}: total_sms", doc.get("total_sms")))
    part = doc.get("partition")
    if not isinstance(part, dict):
        raise ValueError(f"{where}: partition: expected {{min_sms, align, source}}")
    rule = PartitionRule(int(_num(f"{where}: partition.min_sms", part.get("min_sms"))),
                         int(_num(f"{where}: partition.align", part.get("align"))),
                         str(part.get("source") or "the calibration document"))
    sweep = doc.get("sweep")
    if not isinstance(sweep, dict):
        raise ValueError(f"{where}: sweep: expected {{decode: [...], prefill: [...]}}")
    decode = _points(f"{where}: sweep.decode", sweep.get("decode"))
    ladder = sweep_ladder(decode, total, rule, tolerance=tolerance, slowdown=slowdown)
    s_cap = choose_s_cap(decode, tolerance)
    best = min(decode, key=lambda p: p.time_s)
    corun = doc.get("corun") or []
    if not isinstance(corun, list):
        raise ValueError(f"{where}: corun: expected a list of points")
    by_sms = {int(r["sms"]): r for r in corun if isinstance(r, dict) and "sms" in r}
    bw = [float(r["bw_util"]) for s, r in by_sms.items() if s < total and r.get("bw_util") is not None]
    solo = doc.get("solo_ms")
    if not isinstance(solo, dict):
        raise ValueError(f"{where}: solo_ms: expected a mapping of request type to latencies (ms)")
    missing = sorted(set(model.type_names) - set(solo))
    if missing:
        raise ValueError(f"{where}: solo_ms: missing request type(s) {missing} of {model.name}")
    p95_s = {}
    for t in model.type_names:
        xs = solo[t]
        if not isinstance(xs, list) or not xs:
            raise ValueError(f"{where}: solo_ms.{t}: expected a non-empty list of milliseconds")
        p95_s[t] = p95([_num(f"{where}: solo_ms.{t}", x) for x in xs]) / 1e3
    classes, worst_of = class_table(model, p95_s, multiplier)
    synthetic = bool(doc.get("synthetic"))
    # a table's source must say what it is (omniplane.spec's Source): measured, or not
    label = "assumption: synthetic latencies, NOT measured" if synthetic else "measured"
    src = f"{doc.get('source', where)} [{where}]"
    corun_cap, corun_full = by_sms.get(ladder.s_cap), by_sms.get(total)
    return {
        "kind": "omniplane-calibration",
        "model": model.name,
        "gpu": doc.get("gpu"),
        "device": doc.get("device"),
        "synthetic": synthetic,
        "source": src,
        "s_cap": ladder.s_cap,
        "s_cap_rule": (f"smallest swept SM count whose solo decode time is within {tolerance:.0%} of the "
                       f"best ({best.time_s * 1e3:.4g} ms at {best.sms} SMs; HorizonServe section 4.2)"),
        "s_cap_swept": s_cap,
        "ladder": {
            "levels": list(ladder.levels), "s_min": ladder.s_min, "s_cap": ladder.s_cap,
            "total_sms": total, "min_sms": rule.min_sms, "align": rule.align,
            "source": (f"{label}: calibrated from a fixed-SM sweep of the shared stage's decode on "
                       f"{doc.get('device')} (S_cap within {tolerance:.0%} of the best, S_min within "
                       f"{max(slowdown, tolerance):.0%}; partitions of at least {rule.min_sms} SMs in "
                       f"multiples of {rule.align}) from {src}"),
        },
        "b_sat": round(max(bw), 4) if bw else None,
        "corun": {
            "at_cap_ms": corun_cap.get("time_ms") if corun_cap else None,
            "full_ms": corun_full.get("time_ms") if corun_full else None,
        },
        "solo_p95_ms": {t: round(v * 1e3, 3) for t, v in p95_s.items()},
        "slo_table": {
            "kind": "omniplane-slo-table",
            "source": (f"{label}: calibrated, {multiplier:g} x solo p95 (HorizonServe section 6.1), per "
                       "class the largest p95 of its request types ("
                       + "; ".join(f"{c}: {t} {p95_s[t] * 1e3:.1f} ms" for c, t in worst_of.items())
                       + f") from {src}"),
            "classes": classes,
        },
    }


def read(path: Path) -> dict[str, Any]:
    """A calibration document (or a GPU check's sweep) from a JSON file, through the shared input
    opener (size limit; NaN, Infinity and over-long integers refused, naming the file)."""
    from omniplane.perf.colocation_fit import read_sweep_json

    data = read_sweep_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data
