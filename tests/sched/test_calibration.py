"""Offline calibration: SLO table, class profiles, S_cap from a fixed-SM sweep, the ladder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omniplane.perf import ColocationModel, CostModel
from omniplane.perf.solo import default_solo_config, solo_latencies
from omniplane.policy import PathClass
from omniplane.repro.validation.colocation import default_sweep_path
from omniplane.sched.calibration import (
    SLOTable,
    SweepPoint,
    calibrate,
    calibrated_ladder,
    choose_s_cap,
    choose_s_min,
    gpu_rule,
    load_solo_p95,
    simulated_sm_sweep,
    sweep_from_file,
)
from omniplane.spec import compute_capability, load_gpus, load_model

FIG4 = default_sweep_path()  # HorizonServe Figure 4


@pytest.fixture(scope="module")
def qwen_cal() -> object:
    return calibrate(load_model("qwen2.5-omni"), load_gpus().get("RTX6000Ada"))


def test_slo_is_five_times_the_solo_p95(qwen_cal: object) -> None:
    from omniplane.sched.calibration import OfflineCalibration

    assert isinstance(qwen_cal, OfflineCalibration)
    model = load_model("qwen2.5-omni")
    cost = CostModel(model, runtime="vllm")  # the HorizonServe testbed's runtime (vLLM-Omni)
    gpu = load_gpus().get("RTX6000Ada")
    solo = solo_latencies(model, cost, default_solo_config(model, cost, gpu), "a2t")
    assert qwen_cal.slo.slo_s("a2t") == pytest.approx(5 * solo.p95)
    assert set(qwen_cal.profiles) == set(model.type_names)


def test_profiles_split_paths_and_long_paths_need_more_time(qwen_cal: object) -> None:
    from omniplane.sched.calibration import OfflineCalibration

    assert isinstance(qwen_cal, OfflineCalibration)
    p = qwen_cal.profiles
    assert p["t2t"].path is PathClass.SHORT and p["t2t"].downstream_s == 0.0 and p["t2t"].decode_tokens == 0
    assert p["t2a"].path is PathClass.LONG and p["t2a"].downstream_s > 0 and p["t2a"].decode_tokens > 1
    assert p["t2a"].remaining_s(100, 0, 0) > 10 * p["t2t"].remaining_s(100, 0, 0)


def test_s_cap_is_the_smallest_count_within_tolerance_of_the_best() -> None:
    pts = tuple(SweepPoint(s, t) for s, t in [(32, 9.0), (48, 5.2), (64, 4.9), (80, 4.8), (120, 5.6)])
    assert choose_s_cap(pts, 0.05) == 64  # 4.9 <= 1.05 x 4.8; 5.2 is not
    assert choose_s_cap(pts, 0.10) == 48
    assert choose_s_cap(pts, 0.0) == 80


def test_s_min_is_the_fewest_sms_within_the_slowdown_bound() -> None:
    pts = tuple(SweepPoint(s, t) for s, t in [(32, 9.0), (48, 5.2), (64, 4.9), (80, 4.8), (120, 5.6)])
    assert choose_s_min(pts, 0.10) == 48  # 5.2 <= 1.10 x 4.8; 9.0 is not
    assert choose_s_min(pts, 1.0) == 32
    with pytest.raises(ValueError, match="slowdown"):
        choose_s_min(pts, -0.1)


def test_calibrated_ladder_has_several_levels_from_the_sweep(qwen_cal: object) -> None:
    """S_min (within 10% of the best decode) lies below S_cap (within 5%) on the simulated
    sweep, so throttling has levels to move between (issue 15: one level made it a split)."""
    from omniplane.sched.calibration import S_MIN_SLOWDOWN, OfflineCalibration

    assert isinstance(qwen_cal, OfflineCalibration)
    lad, pts = qwen_cal.ladder, qwen_cal.sweep
    assert len(lad.levels) >= 2 and lad.s_cap == choose_s_cap(pts)
    best = min(p.time_s for p in pts)
    at = {p.sms: p.time_s for p in pts}
    assert at[lad.s_min] <= (1 + S_MIN_SLOWDOWN) * best  # every level keeps decode within the bound
    assert all(t > (1 + S_MIN_SLOWDOWN) * best for s, t in at.items() if s < lad.s_min)


def test_s_cap_from_the_papers_figure_4_sweep_file() -> None:
    gpu, pts = sweep_from_file(FIG4)
    assert gpu.name == "RTX6000Ada" and [p.sms for p in pts] == [64, 80, 120]
    assert choose_s_cap(pts) == 64  # 4.80 ms is within 5% of the best 4.65 ms (section 3.3)


def test_simulated_sweep_has_its_best_near_the_colocation_knee() -> None:
    model, gpu = load_model("qwen2.5-omni"), load_gpus().get("RTX6000Ada")
    pts = simulated_sm_sweep(model, CostModel(model), gpu)
    best = min(pts, key=lambda p: p.time_s)
    knee = ColocationModel().params.knee * gpu.sms
    assert abs(best.sms - knee) <= 4
    assert pts[-1].sms == gpu.sms and pts[-1].time_s > best.time_s  # full allocation is worse
    assert choose_s_cap(pts) <= best.sms


def test_ladder_lies_within_s_min_and_s_cap_on_the_gpus_partitions() -> None:
    ada = gpu_rule(load_gpus().get("RTX6000Ada"))  # compute capability 8.9: at least 4, multiples of 2
    lad = calibrated_ladder(142, 71, ada, levels=4)
    assert lad.levels == (56, 60, 66, 70)  # 40% of 142 = 56.8 -> 56; S_cap 71 -> 70
    assert lad.s_cap <= 71 and all(ada.valid(s) for s in lad.levels) and lad.s_aggr == 142
    tight = calibrated_ladder(142, 40, ada, s_min=60)  # S_min above S_cap collapses onto S_cap
    assert tight.levels == (40,)
    hopper = gpu_rule(load_gpus().get("H200"))  # 9.0: at least 8, multiples of 8
    h = calibrated_ladder(132, 71, hopper)
    assert h.levels == (48, 56, 64) and all(s % 8 == 0 for s in h.levels)
    with pytest.raises(ValueError, match="cannot hold two partitions of at least 8"):
        calibrated_ladder(12, 12, hopper)


def test_calibration_and_the_gpu_backend_build_the_same_ladder() -> None:
    """The simulated and the deployed HorizonServe cap on the same levels (issue 19): the GPU
    backend's ladder for the calibration's S_min .. S_cap is the calibration's ladder."""
    from omniplane.sched.ladder import build_ladder
    from omniplane.vllm.settings import SchedulerSettings

    model = load_model("qwen2.5-omni")
    for name in ("RTX6000Ada", "RTXPRO6000", "H200"):
        gpu = load_gpus().get(name)
        cal = calibrate(model, gpu)
        major, minor = compute_capability(gpu)
        settings = SchedulerSettings(total_sms=gpu.sms, compute_capability=f"{major}.{minor}",
                                     ladder={"levels": list(cal.ladder.levels)})
        deployed = build_ladder(settings.total_sms, settings.rule(), settings.ladder.spec())
        assert deployed == cal.ladder
        assert all(settings.rule().valid(s) for s in cal.ladder.levels)


def test_measured_solo_file_errors_name_the_field(tmp_path: Path) -> None:
    model = load_model("mimo-audio")
    good = {"p95_ms": {"t2t": 20, "a2t": 40, "t2a": 3000, "a2a": 3100}, "source": "bench"}
    f = tmp_path / "solo.json"
    f.write_text(json.dumps(good))
    table = load_solo_p95(f, model)
    assert table.slo_s("t2a") == pytest.approx(15.0) and table.source == "bench"
    f.write_text(json.dumps({"p95_ms": {"t2t": 20}}))
    with pytest.raises(ValueError, match=r"solo.json: p95_ms: missing request class\(es\) \['a2a', 'a2t', "):
        load_solo_p95(f, model)
    f.write_text(json.dumps({"p95_ms": {**good["p95_ms"], "t2t": "fast"}}))
    with pytest.raises(ValueError, match=r"p95_ms.t2t: expected a positive number"):
        load_solo_p95(f, model)
    with pytest.raises(ValueError, match="must be > 0"):
        SLOTable({"t2t": 0.0})
