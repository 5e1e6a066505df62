"""vLLM-Omni's CI files beside the vllm-v1 runtime: every ceiling respected, the checked points
within the issue's bounds, the split and provenance as the data file writes them."""

from __future__ import annotations

import re
import statistics
from typing import Any

import pytest

from omniplane.perf.factors import load_calibration
from omniplane.repro.validation.points import Context
from omniplane.repro.validation.vllm_omni_ci import RUNTIME, ci_data, ci_points, ci_section, fit_v1


@pytest.fixture(scope="module")
def section() -> dict[str, Any]:
    return ci_section(Context(), load_calibration())


def test_every_ceiling_and_bound_is_respected(section: dict[str, Any]) -> None:
    assert section["bounds"]["n"] == len(section["rows"]) >= 10
    assert section["bounds"]["respected"] == section["bounds"]["n"]
    assert all(r["predicted_ms"] <= r["published_ms"] for r in section["rows"])


def test_checked_points_are_within_the_issues_bounds(section: dict[str, Any]) -> None:
    errs = [abs(r["rel_error_to_target"]) for r in section["rows"]
            if r["split"] == "check" and r["rel_error_to_target"] is not None]
    assert errs and statistics.median(errs) <= 0.20 and max(errs) <= 0.50


def test_the_fit_uses_exactly_the_split_the_data_file_writes() -> None:
    shipped = load_calibration().runtime(RUNTIME)
    fit_ids = {p.id for p in ci_points() if p.split == "fit"}
    assert set(shipped.fitted_to) == fit_ids and fit_ids
    assert all(p.split in ("fit", "check") for p in ci_points())


def test_shipped_runtime_is_what_the_fit_produces() -> None:
    cal = load_calibration()
    fresh, shipped = fit_v1(Context(), cal), cal.runtime(RUNTIME)
    for f in ("step_s", "memory", "moe_expert_pool", "per_seq_s"):
        assert getattr(fresh, f) == pytest.approx(getattr(shipped, f), rel=1e-2), f
    assert 0.0 < shipped.memory <= 1.0 and 0.0 < shipped.moe_expert_pool <= 1.0


def test_every_number_names_its_file_and_commit() -> None:
    for b in ci_data()["benchmarks"]:
        assert re.fullmatch(r"[0-9a-f]{40}", b["commit"])
        assert b["file"].startswith("tests/dfx/perf/tests/") and "multi_replicas" not in b["file"]
    for p in ci_points():
        assert p.source.startswith("vllm-project/vllm-omni ")
