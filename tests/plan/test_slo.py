"""Latency targets from SLO policies."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.plan.slo import isolated_best, parse_duration, parse_overrides, resolve_targets
from omniplane.spec import ExplicitSLO, IsolatedPercentileSLO, SoloMultiplierSLO
from tests.plan.conftest import table


def test_durations_and_overrides_parse_with_clear_errors() -> None:
    assert parse_duration("800ms") == pytest.approx(0.8)
    assert parse_duration("3s") == 3.0 and parse_duration("1.5") == 1.5
    assert parse_overrides("t2t=800ms, ti2t=3s", ["t2t", "ti2t"]) == {"t2t": 0.8, "ti2t": 3.0}
    with pytest.raises(ValueError, match="unknown request type 'x'"):
        parse_overrides("x=1s", ["t2t"])
    with pytest.raises(ValueError, match="TYPE=DURATION"):
        parse_overrides("t2t", ["t2t"])
    with pytest.raises(ValueError, match="cannot read a duration"):
        parse_duration("fast")


def test_explicit_targets_and_overrides_pass_through() -> None:
    tab = table("qwen3-vl-servegen")
    got = resolve_targets(ExplicitSLO(targets_ms={"t2t": 500, "ti2t": 2000}), tab, tab.cost,
                          overrides={"ti2t": 1.0})
    assert got.seconds == {"t2t": 0.5, "ti2t": 1.0}
    assert got.how["ti2t"] == "override"


def test_isolated_percentile_is_that_percentile_of_the_best_deployment() -> None:
    tab = table("qwen3-vl-servegen")
    for pct in (25.0, 50.0):
        got = resolve_targets(IsolatedPercentileSLO(percentile=pct, multiplier=2.0), tab, tab.cost)
        for t in tab.types:
            lat, _ = isolated_best(tab, t, 0.010)
            assert got.seconds[t] == pytest.approx(2.0 * float(np.percentile(lat, pct)))
    lo = resolve_targets(IsolatedPercentileSLO(percentile=10), tab, tab.cost).seconds
    hi = resolve_targets(IsolatedPercentileSLO(percentile=50), tab, tab.cost).seconds
    assert all(lo[t] <= hi[t] for t in tab.types)


def test_solo_multiplier_scales_with_the_multiplier() -> None:
    tab = table("qwen3-vl-servegen")
    a = resolve_targets(SoloMultiplierSLO(multiplier=2, percentile=95), tab, tab.cost).seconds
    b = resolve_targets(SoloMultiplierSLO(multiplier=5, percentile=95), tab, tab.cost).seconds
    for t in tab.types:
        assert b[t] == pytest.approx(2.5 * a[t])
