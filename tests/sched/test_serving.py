"""HorizonServe configured from serving settings (no model spec, no cost model)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniplane.policy import FCFS, PathClass, StepContext
from omniplane.sched.baselines import EDF, ClassPriority, FixedSplit
from omniplane.sched.factory import POLICIES
from omniplane.sched.horizon import HorizonServe
from omniplane.sched.ladder import LadderSpec, build_ladder, partition_rule
from omniplane.sched.serving import NO_SLO_DEFAULT_S, horizon_config, policy_for_serving, serving_profiles

S, L = PathClass.SHORT, PathClass.LONG
CLASSES: dict[str, tuple[PathClass, float | None]] = {"text": (S, 0.4), "speech": (L, 8.0),
                                                      "batch": (L, None)}
H200 = partition_rule(9, 0)


def test_flat_options_land_in_their_groups() -> None:
    cfg = horizon_config({"u_guard": 3.0, "m": 3, "n_max": 5, "gamma": 0.5, "throttle": False})
    assert cfg.profiler.u_guard == 3.0 and (cfg.rotation.m, cfg.rotation.n_max) == (3, 5)
    assert cfg.spatial.gamma == 0.5 and not cfg.spatial.throttle
    assert horizon_config({}).rotation.n_min == 2  # the paper's defaults otherwise
    with pytest.raises(ValueError, match=r"settings.yaml: unknown option\(s\) \['x'\]"):
        horizon_config({"x": 1}, "settings.yaml")
    with pytest.raises(ValueError, match="gamma must be in"):
        horizon_config({"gamma": 0.0})


def test_profiles_from_a_class_table() -> None:
    prof = serving_profiles(CLASSES, {})
    # a class without an SLO gets the most lenient one: it ages into protection, never starves
    assert prof["batch"].slo_s == pytest.approx(8.0) and prof["speech"].slo_s == pytest.approx(8.0)
    assert serving_profiles(CLASSES, {"default_slo_s": 20})["batch"].slo_s == 20.0
    assert serving_profiles({"a": (S, None)}, {})["a"].slo_s == NO_SLO_DEFAULT_S
    with pytest.raises(ValueError, match="default_slo_s"):
        serving_profiles(CLASSES, {"default_slo_s": math.inf})
    assert prof["text"].path is S and prof["speech"].path is L
    # without a measured profile r_hat is the solo p95 the SLO was derived from (SLO / 5)
    assert prof["speech"].step_s == pytest.approx(8.0 / 5)


@pytest.mark.parametrize("name", [*(p for p in POLICIES if p != "static-cap"), "fcfs"])
def test_every_factory_name_is_available_to_serving(name: str) -> None:
    lad = build_ladder(132, H200, LadderSpec(levels=(40, 56, 64)))
    policy, mode = policy_for_serving(name, CLASSES, 132, lad, {})
    assert mode in ("split", "timeslice", "mps")
    kind = {"vanilla": FCFS, "fcfs": FCFS, "mps": FCFS, "edf": EDF, "edf-mps": EDF,
            "static-split": FixedSplit, "edf-split": FixedSplit,
            "priority": ClassPriority}.get(name, HorizonServe)
    assert isinstance(policy, kind)
    if isinstance(policy, FixedSplit):  # the split is held at S_cap on every step
        assert mode == "split" and policy.sm_cap == lad.s_cap
        assert isinstance(policy.inner, EDF if name == "edf-split" else FCFS)
    if isinstance(policy, EDF):  # a class without an SLO gets a finite default deadline
        assert math.isfinite(policy.slo_s["batch"])


def test_static_cap_needs_a_capacity_curve_serving_does_not_have() -> None:
    with pytest.raises(ValueError, match="static-cap' needs a fixed-SM sweep"):
        policy_for_serving("static-cap", CLASSES, 132, build_ladder(132, H200), {})


def test_a_ladder_for_another_gpu_is_refused() -> None:
    with pytest.raises(ValueError, match="ladder is for 132 SMs, the GPU has 114"):
        policy_for_serving("horizon", CLASSES, 114, build_ladder(132, H200), {})


@given(st.floats(0.0, 1.0), st.integers(0, 4), st.lists(st.integers(1, 15), min_size=1, max_size=8))
def test_published_cap_is_a_ladder_level_or_the_whole_gpu(bw: float, active: int, steps: list[int]) -> None:
    lad = build_ladder(132, H200, LadderSpec(levels=tuple(8 * k for k in steps)))
    p, _ = policy_for_serving("horizon", CLASSES, 132, lad, {})
    assert isinstance(p, HorizonServe)
    cap = p.decide(StepContext(0.0, 0, (), (), active, bw, 132)).sm_cap
    assert cap in set(lad.levels) if active else cap == 132
    none, _ = policy_for_serving("horizon", CLASSES, 132, None, {})  # no SM control: no cap
    assert none.decide(StepContext(0.0, 0, (), (), active, bw, 132)).sm_cap is None
