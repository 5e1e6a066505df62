"""Figures 8-11 of HorizonServe from simulated runs (matplotlib, written as PNG files)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omniplane.repro.horizon.experiment import ControlTrace, RunResult, SweepSpec
from omniplane.sched.factory import ABLATIONS, BASELINES

MAIN = (*BASELINES, "horizon")
LABEL = {"vanilla": "Vanilla", "edf": "EDF", "mps": "MPS", "edf-mps": "EDF+MPS", "horizon": "HorizonServe",
         "no-rotation": "w/o path rotation", "no-sm-throttle": "w/o SM throttle"}
X_LABEL = {"rate": "arrival rate (req/s)", "long-fraction": "long-path fraction"}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(spec: SweepSpec) -> str:
    fixed = "long fraction 0.30" if spec.sweep == "rate" else "rate 0.35 req/s"
    return f"{spec.model} on {spec.gpu}\n({fixed}, max_num_seqs {spec.max_seqs})"


def figure8(spec: SweepSpec, results: Sequence[RunResult], out: Path) -> Path:
    """SLO attainment vs the swept variable, baselines and HorizonServe."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    for name in (p for p in MAIN if p in spec.policies):
        ys = [100 * r.attainment for r in results if r.policy == name]
        ax.plot(spec.xs, ys, marker="o", label=LABEL[name], lw=2.2 if name == "horizon" else 1.3)
    ax.set_xlabel(X_LABEL[spec.sweep])
    ax.set_ylabel("SLO attainment (%)")
    ax.set_ylim(0, 102)
    ax.set_title(_title(spec), fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    path = out / f"fig8_{spec.sweep}.png"
    return _save(plt, fig, path)


def figure9(spec: SweepSpec, results: Sequence[RunResult], out: Path) -> Path:
    """Per-class p95 first-response latency at the sweep's most stressed (last) point."""
    plt = _plt()
    x = spec.xs[-1]
    rows = {r.policy: r for r in results if r.policy in MAIN and _at(r, spec, x)}
    names = [p for p in MAIN if p in rows]
    classes = sorted({c for r in rows.values() for c in r.p95_ms})
    fig, ax = plt.subplots(figsize=(7.6, 3.4))
    width = 0.8 / max(1, len(names))
    for k, name in enumerate(names):
        ys = [rows[name].p95_ms.get(c, float("nan")) for c in classes]
        ax.bar([i + k * width for i in range(len(classes))], ys, width, label=LABEL[name])
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(classes))], classes)
    ax.set_yscale("log")
    ax.set_ylabel("p95 first-response latency (ms)")
    ax.set_title(f"{_title(spec)}, {spec.sweep} = {x}", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    path = out / f"fig9_{spec.sweep}.png"
    return _save(plt, fig, path)


def figure10(trace: ControlTrace, out: Path, total_sms: int, max_points: int = 6000) -> Path:
    """Downstream load, smoothed memory pressure and the shared-stage SM cap over time."""
    plt = _plt()
    stride = max(1, len(trace.t) // max_points)
    t = trace.t[::stride]
    fig, axes = plt.subplots(3, 1, figsize=(6.4, 4.8), sharex=True)
    axes[0].step(t, trace.downstream[::stride], where="post", lw=0.8)
    axes[0].set_ylabel("downstream\nrequests")
    axes[1].plot(t, trace.bw_util[::stride], lw=0.4, alpha=0.4, label="B(t)")
    axes[1].plot(t, trace.pressure[::stride], lw=0.9, label="EWMA B_hat(t)")
    axes[1].set_ylabel("DRAM util.")
    axes[1].set_ylim(0, 1.05)
    axes[1].legend(fontsize=7, loc="lower right")
    axes[2].step(t, [100 * s / total_sms for s in trace.sm_cap[::stride]], where="post", lw=0.8)
    axes[2].set_ylabel("stage-0 SM\ncap (%)")
    axes[2].set_xlabel("time (s)")
    corr = trace.correlation()
    axes[0].set_title(f"HorizonServe at rate {trace.rate}, long fraction {trace.long_fraction}: "
                      f"corr(B_hat, cap) = {corr:.3f}", fontsize=8)
    path = out / "fig10.png"
    return _save(plt, fig, path)


def figure11(spec: SweepSpec, results: Sequence[RunResult], out: Path) -> Path:
    """Ablation: full HorizonServe vs without rotation / without SM throttling at the stressed point."""
    plt = _plt()
    x = spec.xs[-1]
    names = [p for p in ("horizon", *ABLATIONS) if p in spec.policies]
    vals = [100 * next(r.attainment for r in results if r.policy == n and _at(r, spec, x)) for n in names]
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    bars = ax.bar([LABEL[n] for n in names], vals, color=["C3", "C0", "C2"][: len(names)])
    for b, v in zip(bars, vals, strict=True):
        ax.text(b.get_x() + b.get_width() / 2, v + 1, f"{v:.0f}", ha="center", fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("SLO attainment (%)")
    ax.set_title(f"{_title(spec)}, {spec.sweep} = {x}", fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    path = out / f"fig11_{spec.sweep}.png"
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def _at(r: RunResult, spec: SweepSpec, x: float) -> bool:
    rate, frac = spec.point(x)
    return abs(r.rate - rate) < 1e-12 and abs(r.long_fraction - frac) < 1e-12
