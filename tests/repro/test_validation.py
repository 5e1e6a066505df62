"""``perf validate`` shows every public point the catalog can express, split honestly."""

from __future__ import annotations

import csv
import statistics
from collections import Counter
from typing import Any

import pytest

from omniplane.perf.factors import load_calibration
from omniplane.repro.validation.fit import fit_calibration
from omniplane.repro.validation.points import Context, Role, data_dir
from omniplane.repro.validation.report import all_points, validate


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return validate(transfer=False)


def test_lists_many_public_points_with_prediction_measurement_and_error(report: dict[str, Any]) -> None:
    pts = report["points"]
    assert len(pts) >= 25
    for p in pts:
        assert p["measured"] > 0 and p["predicted"] > 0
        assert p["rel_error"] == pytest.approx(p["predicted"] / p["measured"] - 1, abs=1e-3)
        assert p["role"] in ("fit", "runtime-fit", "held-out") and p["source"]


def test_held_out_median_error_is_at_most_15_percent(report: dict[str, Any]) -> None:
    held = [abs(p["rel_error"]) for p in report["points"] if p["role"] == "held-out"]
    assert len(held) >= 25
    assert statistics.median(held) <= 0.15
    assert report["summary"]["held-out"]["all"]["n"] == len(held)


def test_no_splitwise_row_is_dropped_silently(report: dict[str, Any]) -> None:
    """Every (model, GPU, TP, size) configuration of the Splitwise file appears twice (prefill
    and decode) or is counted among the rows the catalog cannot express."""
    with (data_dir() / "splitwise-perf/perf_model.csv").open() as fh:
        configs = Counter((r["model"], r["hardware"], r["tensor_parallel"], r["prompt_size"],
                           r["batch_size"], r["token_size"]) for r in csv.DictReader(fh))
    shown = sum(1 for p in report["points"] if p["dataset"] == "splitwise")
    missing = sum(m["count"] for m in report["not_expressible"] if m["dataset"] == "splitwise")
    assert shown + missing == 2 * len(configs)
    assert any("pcap" in m["what"] for m in report["not_expressible"])


def test_fit_and_held_out_points_never_mix(report: dict[str, Any]) -> None:
    cal = load_calibration()
    fitted = {i for k in cal.kinds.values() for i in k.fitted_to}
    roles = {p["id"]: p["role"] for p in report["points"]}
    assert fitted and fitted <= set(roles)
    assert all(roles[i] == "fit" for i in fitted)
    assert all(p["dataset"] != "splitwise" or "bloom" not in p["id"] for p in report["points"]
               if p["role"] == "fit")


def test_shipped_calibration_is_what_the_fit_produces() -> None:
    """Provenance: refitting the fit points reproduces the shipped factors."""
    ctx = Context()
    points, _ = all_points(ctx)
    fresh, shipped = fit_calibration(ctx, points), load_calibration()
    assert set(fresh.kinds) == set(shipped.kinds)
    for name, k in fresh.kinds.items():
        for a, b in zip(k.efficiency.vector(), shipped.kinds[name].efficiency.vector(), strict=True):
            assert a == pytest.approx(b, rel=1e-3)
    assert shipped.kinds["A100-80GB"].source.startswith("fitted:")
    assert shipped.entry("RTX6000Ada").source.startswith("assumption:")
    assert shipped.kinds["A100-80GB"].source_of("layer_s").startswith("assumption:")
    assert all(p.role is Role.FIT for p in points if p.id in set(shipped.kinds["H100-SXM"].fitted_to))


def test_colocation_section_covers_every_catalog_gpu(report: dict[str, Any]) -> None:
    co = report["colocation"]
    assert {r["gpu"] for r in co["per_gpu"]} == {"A100-80GB", "H100-SXM", "H200", "L40S", "RTX6000Ada",
                                                 "RTXPRO6000"}
    assert len([r for r in co["points"] if r["metric"] == "time_ms"]) == 5


def test_shipped_runtimes_are_what_the_fit_produces() -> None:
    """Provenance: refitting the runtime points reproduces the shipped runtimes' factors."""
    from omniplane.perf.runtime import NUMERIC
    from omniplane.repro.validation.fit import fit_all

    ctx = Context()
    points, _ = all_points(ctx)
    fresh, shipped = fit_all(ctx, points), load_calibration()
    assert shipped.default_runtime == "cornserve"
    assert set(shipped.runtimes) >= {"roofline", "vllm", "cornserve"}
    for name in ("vllm", "cornserve"):
        a, b = fresh.runtime(name), shipped.runtime(name)
        for f in NUMERIC:
            assert getattr(a, f) == pytest.approx(getattr(b, f), rel=1e-2, abs=1e-9), (name, f)
        assert b.source.startswith("fitted:") and set(b.fitted_to) <= {p.id for p in points}
        assert all(p.role is Role.RUNTIME and p.runtime == name for p in points if p.id in set(b.fitted_to))
