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
    from omniplane.repro.validation.vllm_omni_audio import audio_points

    fit_ids = {p.id for p in ci_points() if p.split == "fit"}
    fit_ids |= {a.id for a in audio_points() if a.split == "fit"}
    assert set(shipped.fitted_to) == fit_ids and fit_ids
    assert all(p.split in ("fit", "check") for p in ci_points())


def test_shipped_runtime_is_what_the_fit_produces() -> None:
    cal = load_calibration()
    fresh, shipped = fit_v1(Context(), cal), cal.runtime(RUNTIME)
    for f in ("step_s", "memory", "moe_expert_pool", "per_seq_s"):
        assert getattr(fresh, f) == pytest.approx(getattr(shipped, f), rel=1e-2), f
    assert shipped.memory is not None and 0.0 < shipped.memory <= 1.0 and 0.0 < shipped.moe_expert_pool <= 1.0


def test_every_number_names_its_file_and_commit() -> None:
    for b in ci_data()["benchmarks"]:
        assert re.fullmatch(r"[0-9a-f]{40}", b["commit"])
        assert b["file"].startswith("tests/dfx/perf/tests/") and "multi_replicas" not in b["file"]
    for p in ci_points():
        assert p.source.startswith("vllm-project/vllm-omni ")


# ---- audio output: the talker and code2wav ----------------------------------------------------

@pytest.fixture(scope="module")
def audio() -> dict[str, Any]:
    from omniplane.repro.validation.vllm_omni_audio import audio_section

    return audio_section(Context(), load_calibration())


def test_audio_checks_within_the_issues_bounds_and_bounds_respected(audio: dict[str, Any]) -> None:
    checks = {r["id"]: abs(r["rel_error"]) for r in audio["rows"] if r["split"] == "check"}
    assert len(checks) >= 5 and statistics.median(checks.values()) <= 0.20
    # the issue's 50% bar holds for every check but concurrency 32, which misses it (documented in
    # docs/results/perf-vllm-omni-ci.md): any other miss is a regression
    beyond = {i for i, e in checks.items() if e > 0.50}
    assert beyond <= {"vllm-omni-ci/omni-no-async-chunk-2500x900/e2el/c32"}, beyond
    bounds = [r for r in audio["rows"] if r["split"] == "bound"]
    assert bounds and all(r["predicted_ms"] <= r["published_ms"] for r in bounds)


def test_talker_fit_is_reproduced_and_uses_only_fit_points() -> None:
    from omniplane.repro.validation.vllm_omni_audio import audio_points, fit_talker

    cal = load_calibration()
    shipped = cal.runtime(RUNTIME)
    fresh = fit_talker(Context(), cal, shipped)
    assert fresh.mtp_pass_s == pytest.approx(shipped.mtp_pass_s, rel=1e-2)
    assert fresh.mtp_seq_pass_s == pytest.approx(shipped.mtp_seq_pass_s, rel=1e-2)
    fit_ids = {p.id for p in audio_points() if p.split == "fit"}
    assert fit_ids and fit_ids <= set(shipped.fitted_to)
    assert not {p.id for p in audio_points() if p.split != "fit"} & set(shipped.fitted_to)
    # the talker's factor changed from the report's, and the text side's factors did not
    assert shipped.mtp_pass_s < cal.runtime("vllm").mtp_pass_s
    assert shipped.step_s == pytest.approx(fit_v1(Context(), cal).step_s, rel=1e-2)


def test_the_two_gpu_closed_loop_at_concurrency_1_is_the_serial_replay() -> None:
    from dataclasses import replace

    from omniplane.repro.validation.vllm_omni_audio import audio_points, predict_e2el_ms

    ctx, cal = Context(), load_calibration()
    serial = next(p for p in audio_points() if p.mode == "serial" and p.split == "fit")
    piped = replace(serial, mode="pipeline", concurrency=1, num_prompts=2)
    assert predict_e2el_ms(ctx, cal, piped) == pytest.approx(predict_e2el_ms(ctx, cal, serial), rel=1e-6)
    # more clients: each request waits for the others' thinker and talker work, never less
    busier = [predict_e2el_ms(ctx, cal, replace(piped, concurrency=c, num_prompts=2 * c)) for c in (1, 4, 16)]
    assert busier == sorted(busier) and busier[-1] > busier[0]
