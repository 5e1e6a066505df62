"""scripts/horizon_tables.py: its run plans and its tables (no simulation here; the runs are the
experiment's, tested in tests/sched)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("horizon_tables", ROOT / "scripts" / "horizon_tables.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["horizon_tables"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_lean_plan_is_the_full_plan_with_every_table_s_first_seed_first() -> None:
    ht = _script()
    full = ht.plan("full", (0, 1, 2), (4, 8))
    lean = ht.plan("lean", (0, 1, 2), (4, 8))
    keys = {ht.key(t) for t in full}
    assert len(keys) == len(full)  # no run twice
    assert keys <= {ht.key(t) for t in lean}  # lean is an order (plus duplicates dropped when run)
    first_other_seed = next(i for i, t in enumerate(lean) if t["seed"] != 0 and t["table"] != "fig10")
    assert {t["table"] for t in lean[:first_other_seed]} >= {"stressed4", "stressed8", "mimo", "bagel"}


def _row(policy: str, seed: int, att: float, tpot: float) -> dict[str, Any]:
    return {"table": "stressed4", "model": "m", "gpu": "g", "rate": 0.5, "frac": 0.3, "max_seqs": 4,
            "policy": policy, "seed": seed, "attainment": att, "attainment_window": att,
            "attainment_by_class": {"t2t": att, "t2a": 1.0}, "long_classes": ["t2a"],
            "shared_tpot_ms": {"p50": tpot, "p95": tpot},
            "executors": {"stage0/0.0": {"utilisation": 0.8, "queue_mean": 2.0, "queue_max": 9.0}}}


def test_the_table_compares_horizon_with_the_best_paper_baseline_on_the_same_seeds() -> None:
    ht = _script()
    rows = [_row("horizon", s, 0.9, 30.0) for s in (0, 1)] + [_row("mps", s, 0.6, 32.0) for s in (0, 1)]
    rows += [_row("vanilla", 0, 0.99, 36.0)]  # one seed only: not comparable with horizon's two
    rows += [_row("no-rotation", s, 0.85, 30.0) for s in (0, 1)]
    text = "\n".join(ht.point_tables(rows))
    assert "horizon / best paper baseline (mps) = 1.50x" in text
    assert "horizon - no-rotation +5.0 points" in text
    assert "| 80, 2.00 / 9 | - |" in text  # shared stage busy, queue; no downstream executor
    assert "| vanilla | 99.0 [99.0] |" in text
