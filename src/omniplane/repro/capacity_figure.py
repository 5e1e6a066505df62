"""The capacity sweep's figure (``omniplane plan --rates ... --figures DIR``): offered rate on x,
the fewest GPUs (left) and the hourly cost (right) on y, one line per GPU kind (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def write_sweep(rows: Sequence[dict[str, Any]], folder: Path, stem: str = "capacity") -> Path:
    """``rows``: the JSON rows of ``plan --rates`` (rate, gpu, gpus, cost_per_hour; with
    ``--inventory`` also the inventory's rows, one more line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(r["gpu"] for r in rows))
    fig, (ax_n, ax_c) = plt.subplots(1, 2, figsize=(10, 4))
    for kind in kinds:
        mine = sorted((r for r in rows if r["gpu"] == kind and r["gpus"] is not None),
                      key=lambda r: r["rate"])
        label = kind if mine else f"{kind} (no count found)"
        ax_n.plot([r["rate"] for r in mine], [r["gpus"] for r in mine], marker="o", label=label)
        priced = [r for r in mine if r["cost_per_hour"] is not None]
        ax_c.plot([r["rate"] for r in priced], [r["cost_per_hour"] for r in priced], marker="o", label=label)
    ax_n.set_xlabel("offered rate (req/s)")
    ax_n.set_ylabel("fewest GPUs meeting the attainment target")
    ax_c.set_xlabel("offered rate (req/s)")
    ax_c.set_ylabel("USD per hour")
    for ax in (ax_n, ax_c):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path = folder / f"{stem}-sweep.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
