"""Figures of a planning run (matplotlib, Agg backend; imported only when figures are asked for).

* Figure 7: goodput of evaluated plans, coloured by the phase that pruned them.
* Figure 8: the planner's goodput against every baseline's.
* Figure 9: per-type goodput against the latency target (same simulation, the target varied).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from omniplane.plan.compare import Comparison
from omniplane.spec import ModelSpec

PHASE_STYLE = {  # phase -> (colour, label, size)
    "flow": ("#bbbbbb", "pruned by flow (dominated bound)", 6),
    "monte_carlo": ("#4c72b0", "pruned after Monte Carlo", 8),
    "simulated": ("#dd8452", "simulated", 30),
    "selected": ("#c44e52", "selected", 120),
}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def type_groups(model: ModelSpec) -> tuple[tuple[str, list[int]], tuple[str, list[int]]]:
    """Two groups of types for a 2-D view: by output modality if there are two, else by
    whether the type has non-text input."""
    outs = sorted({rt.output.value for rt in model.request_types})
    if len(outs) >= 2:
        a = [i for i, rt in enumerate(model.request_types) if rt.output.value == outs[1]]
        b = [i for i, rt in enumerate(model.request_types) if rt.output.value != outs[1]]
        return (f"{outs[1]} output", a), ("other output", b)
    plain = [i for i, rt in enumerate(model.request_types) if len(rt.inputs) == 1]
    rich = [i for i, rt in enumerate(model.request_types) if len(rt.inputs) > 1]
    if plain and rich:
        return ("text-only input", plain), ("multimodal input", rich)
    return (model.request_types[0].name, [0]), ("other types", list(range(1, len(model.request_types))))


def figure7(cmp: Comparison, path: Path) -> Path:
    plt = _plt()
    res = cmp.planner.result
    (xa, ia), (xb, ib) = type_groups(res.problem.model)
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    phases = np.array(res.cloud.phase)
    good = np.concatenate(res.cloud.goodput) if res.cloud.goodput else np.zeros((0, len(res.types)))
    for phase, (colour, label, size) in PHASE_STYLE.items():
        sel = phases == phase
        if sel.any():
            ax.scatter(good[sel][:, ia].sum(axis=1), good[sel][:, ib].sum(axis=1), s=size, c=colour,
                       label=f"{label} ({int(sel.sum())})", alpha=0.7 if phase != "selected" else 1.0,
                       marker="*" if phase == "selected" else "o", edgecolors="none")
    ax.set_xlabel(f"goodput, {xa} types (req/s)")
    ax.set_ylabel(f"goodput, {xb} types (req/s)")
    ax.set_title(f"{res.problem.model.name}, {res.problem.gpus} x {res.problem.gpu.name}: evaluated plans\n"
                 "(Monte Carlo estimate; simulated plans: simulator)", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return _save(fig, path)


def figure8(cmp: Comparison, path: Path) -> Path:
    plt = _plt()
    names = [e.name for e in cmp.entries]
    totals = [e.total for e in cmp.entries]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    colours = ["#c44e52"] + ["#8c8c8c"] * (len(names) - 1)
    bars = ax.bar(names, totals, color=colours)
    for bar, v in zip(bars, totals, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    res = cmp.planner.result
    ax.set_ylabel("goodput (req/s)")
    metric = "best over offered rates" if cmp.swept else "at alpha x R_d"
    head = f"{res.problem.model.name}, {res.problem.gpus} x {res.problem.gpu.name}"
    ax.set_title(f"{head}: planner vs baselines ({metric})", fontsize=10)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    return _save(fig, path)


def figure9(cmp: Comparison, path: Path, types: Sequence[str] | None = None) -> Path:
    plt = _plt()
    res = cmp.planner.result
    model = res.problem.model
    pick = list(types) if types else _two_types(res.problem.mix, model)
    scales = np.geomspace(0.25, 4.0, 25)
    fig, axes = plt.subplots(1, len(pick), figsize=(5.0 * len(pick), 4.0), squeeze=False)
    for ax, t in zip(axes[0], pick, strict=True):
        ti = res.types.index(t)
        target = res.targets.seconds[t]
        for e in cmp.entries:
            if e.outcome is None or not e.outcome.latencies:
                continue
            ys = [e.outcome.goodput_at(ti, target * k) for k in scales]
            ax.plot(scales * target * 1e3, ys, label=e.name, lw=2.2 if e.name == "planner" else 1.2)
        ax.axvline(target * 1e3, color="k", ls=":", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel(f"latency target of {t} (ms)")
        ax.set_ylabel("goodput (req/s)")
        ax.set_title(f"{t} ({model.request_type(t).label})", fontsize=10)
        ax.legend(fontsize=8)
    return _save(fig, path)


def _two_types(mix: dict[str, float] | object, model: ModelSpec) -> list[str]:
    (_, ia), (_, ib) = type_groups(model)
    weights = dict(mix) if isinstance(mix, dict) else {}
    out = []
    for group in (ia, ib):
        names = [model.request_types[i].name for i in group]
        if names:
            out.append(max(names, key=lambda n: weights.get(n, 0.0)))
    return out


def _save(fig: object, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()  # type: ignore[attr-defined]
    fig.savefig(path, dpi=120)  # type: ignore[attr-defined]
    import matplotlib.pyplot as plt

    plt.close(fig)  # type: ignore[arg-type]
    return path


def write_all(cmp: Comparison, folder: Path, stem: str) -> list[Path]:
    return [figure7(cmp, folder / f"{stem}-fig7-pruning.png"),
            figure8(cmp, folder / f"{stem}-fig8-baselines.png"),
            figure9(cmp, folder / f"{stem}-fig9-goodput-vs-target.png")]
