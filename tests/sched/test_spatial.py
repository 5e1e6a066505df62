"""The spatial controller: EWMA pressure, Equation 1, hysteresis, headroom (section 4.4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniplane.sched.ladder import Ladder, PartitionRule
from omniplane.sched.spatial import SpatialConfig, SpatialController, level_thresholds
from tests.sched.helpers import LADDER

ANY = PartitionRule(1, 1)  # every SM count is a partition: the tests pick the levels


def test_ewma_weights_the_newest_sample_by_gamma() -> None:
    c = SpatialController(LADDER, SpatialConfig(gamma=0.4))
    c.observe(0.5)  # the first sample initialises the average
    assert c.observe(1.0) == pytest.approx(0.4 * 1.0 + 0.6 * 0.5)
    assert c.observe(-3.0) == pytest.approx(0.6 * 0.7)  # samples are clamped to [0, 1]


def test_no_downstream_means_the_aggressive_cap_and_no_headroom() -> None:
    c = SpatialController(LADDER)
    c.observe(0.99)
    d = c.decide(downstream_active=0)
    assert d.sm_shared == LADDER.s_aggr and d.sm_down == 0 and not d.co_running


def test_equation_1_maps_pressure_onto_the_ladder() -> None:
    lad = Ladder(142, (40, 50, 60, 70), ANY)
    cfg = SpatialConfig(gamma=1.0, b_sat=0.8)
    low, high = SpatialController(lad, cfg), SpatialController(lad, cfg)
    low.observe(0.0)
    high.observe(0.95)  # above B_sat: rho clamps to 1
    assert low.decide(1).sm_shared == 40
    d = high.decide(1)
    assert d.sm_shared == 70 and d.rho == 1.0 and d.sm_down == 142 - 70
    mid = SpatialController(lad, cfg)
    mid.observe(0.8 * (50 - 40) / 30)  # target exactly 50
    assert mid.decide(2).sm_shared == 50


def test_the_cap_follows_the_snapped_level_as_algorithm_1_says() -> None:
    """Delta_step = 1 (the paper's "one ladder step"): every change of the snapped level applies;
    no dead band beyond the snap (the replaced rule waited for the unsnapped target to reach
    the neighbouring level, which the paper does not do)."""
    lad = Ladder(142, (40, 50, 60, 70), ANY)
    c = SpatialController(lad, SpatialConfig(gamma=1.0, b_sat=1.0))
    c.observe(1 / 3)  # target 50
    assert c.decide(1).sm_shared == 50
    c.observe(0.5)  # target 55: ties snap to the lower level
    assert c.decide(1).sm_shared == 50
    c.observe(0.55)  # target 56.5: snaps to 60, one level up, applied
    assert c.decide(1).sm_shared == 60
    c.observe(0.45)  # target 53.5: snaps to 50, applied
    assert c.decide(1).sm_shared == 50
    c.observe(0.0)
    assert c.decide(1).sm_shared == 40


def test_a_larger_delta_step_holds_the_cap_until_the_level_moves_that_far() -> None:
    lad = Ladder(142, (40, 50, 60, 70), ANY)
    c = SpatialController(lad, SpatialConfig(gamma=1.0, b_sat=1.0, delta_step=2))
    c.observe(0.0)
    assert c.decide(1).sm_shared == 40  # entering co-running applies at once
    c.observe(1 / 3)  # snaps to 50: one level, held
    assert c.decide(1).sm_shared == 40
    c.observe(2 / 3)  # snaps to 60: two levels, applied
    assert c.decide(1).sm_shared == 60
    assert c.decide(0).sm_shared == lad.s_aggr  # leaving co-running applies at once
    with pytest.raises(ValueError, match="delta_step"):
        SpatialConfig(delta_step=0)


def test_throttle_off_publishes_no_cap() -> None:
    c = SpatialController(LADDER, SpatialConfig(throttle=False))
    c.observe(0.9)
    assert c.decide(3).sm_shared is None


def test_ladder_and_config_validation() -> None:
    with pytest.raises(ValueError, match="ascending"):
        Ladder(142, (60, 50), ANY)
    with pytest.raises(ValueError, match="not partitions of 142 SMs"):
        Ladder(142, (50, 142), ANY)
    with pytest.raises(ValueError, match="S_cap < S_aggr"):
        Ladder(142, (50, 60), ANY, s_aggr=60)
    with pytest.raises(ValueError, match="S_aggr <= S_tot"):
        Ladder(142, (50, 60), ANY, s_aggr=150)
    with pytest.raises(ValueError, match="alignment 2"):
        Ladder(142, (50, 61), PartitionRule(4, 2))
    with pytest.raises(ValueError, match="gamma"):
        SpatialConfig(gamma=0.0)
    with pytest.raises(ValueError, match="b_sat"):
        SpatialConfig(b_sat=1.5)
    assert LADDER.s_min == 56 and LADDER.s_cap == 70


@given(st.lists(st.tuples(st.floats(-0.5, 1.5), st.integers(0, 3)), min_size=1, max_size=40),
       st.booleans())
def test_select_is_decide_without_the_record(samples: list[tuple[float, int]], throttle: bool) -> None:
    cfg = SpatialConfig(throttle=throttle)
    fast, full = SpatialController(LADDER, cfg), SpatialController(LADDER, cfg)
    for bw, active in samples:
        fast.observe(bw)
        full.observe(bw)
        assert fast.select(active) == full.decide(active).sm_shared


@given(st.floats(0.0, 1.0), st.sampled_from([(40, 50, 60, 70), (48, 56, 64), (42, 46, 48, 52), (64,)]))
def test_level_thresholds_are_where_equation_1_changes_level(b: float, levels: tuple[int, ...]) -> None:
    """The thresholds partition B_hat so that band i is exactly the B_hat values Equation 1 sends
    to level i (ties to the lower level), with the controller's own arithmetic."""
    lad = Ladder(188, levels, ANY)
    cfg = SpatialConfig(gamma=1.0, b_sat=0.93)
    cuts = level_thresholds(lad, cfg.b_sat)
    assert len(cuts) == len(levels) - 1 and list(cuts) == sorted(cuts)
    c = SpatialController(lad, cfg)
    c.observe(b)
    band = sum(1 for x in cuts if b > x + 1e-12)
    if all(abs(b - x) > 1e-9 for x in cuts):  # off a boundary the band names the cap
        assert c.select(1) == levels[band]
