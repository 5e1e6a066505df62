"""HorizonServe configured from serving settings (no model spec, no cost model)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniplane.policy import StepContext
from omniplane.sched.horizon import HorizonServe
from omniplane.sched.serving import horizon_config, horizon_for_serving, serving_calibration

CLASSES: dict[str, tuple[str, float | None]] = {"text": ("short", 0.4), "speech": ("long", 8.0),
                                                "batch": ("long", None)}


def test_flat_options_land_in_their_groups() -> None:
    cfg = horizon_config({"u_guard": 3.0, "m": 3, "n_max": 5, "gamma": 0.5, "throttle": False})
    assert cfg.profiler.u_guard == 3.0 and (cfg.rotation.m, cfg.rotation.n_max) == (3, 5)
    assert cfg.spatial.gamma == 0.5 and not cfg.spatial.throttle
    assert horizon_config({}).rotation.n_min == 2  # the paper's defaults otherwise
    with pytest.raises(ValueError, match=r"settings.yaml: unknown option\(s\) \['x'\]"):
        horizon_config({"x": 1}, "settings.yaml")
    with pytest.raises(ValueError, match="gamma must be in"):
        horizon_config({"gamma": 0.0})


def test_calibration_from_a_class_table() -> None:
    cal, has_ladder = serving_calibration(CLASSES, 132, (64, 40, 56, 132, 0), {})
    assert has_ladder and cal.ladder.levels == (40, 56, 64)  # sorted, only real partitions
    assert (cal.ladder.s_aggr, cal.ladder.s_total) == (132, 132)
    assert cal.profiles["batch"].slo_s == math.inf and "batch" not in cal.slo.p95_s
    assert cal.slo.slo_s("speech") == pytest.approx(8.0)  # the multiplier round-trips
    _, has_ladder = serving_calibration(CLASSES, 0, (), {})
    assert not has_ladder


@given(st.floats(0.0, 1.0), st.integers(0, 4), st.lists(st.integers(1, 131), min_size=1, max_size=8))
def test_published_cap_is_a_ladder_level_or_the_whole_gpu(bw: float, active: int, levels: list[int]) -> None:
    p = horizon_for_serving(CLASSES, 132, levels, {})
    assert isinstance(p, HorizonServe)
    cap = p.decide(StepContext(0.0, 0, (), (), active, bw, 132)).sm_cap
    assert cap in set(levels) if active else cap == 132
