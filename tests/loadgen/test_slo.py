"""SLO targets from a workload's policy."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.loadgen.slo import parse_overrides, slo_targets
from omniplane.perf import CostModel
from omniplane.perf.solo import default_solo_config, solo_latencies
from omniplane.spec import ExplicitSLO, SoloMultiplierSLO, load_gpus, load_model


def test_solo_multiplier_is_the_multiple_of_the_solo_percentile() -> None:
    model, gpu = load_model("qwen3-omni"), load_gpus().get("A100-80GB")
    cost = CostModel(model)
    got = slo_targets(model, SoloMultiplierSLO(multiplier=2.0, percentile=90), gpu, cost=cost)
    solo = solo_latencies(model, cost, default_solo_config(model, cost, gpu), "ti2a", n=200, seed=0)
    assert got["ti2a"] == pytest.approx(2.0 * np.percentile(solo.samples, 90))
    assert set(got) == set(model.type_names)


def test_explicit_targets_and_overrides() -> None:
    model = load_model("qwen3-omni")
    got = slo_targets(model, ExplicitSLO(targets_ms={"ti2t": 500.0}), None, overrides={"ti2a": 700.0})
    assert got == {"ti2t": 0.5, "ti2a": 0.7}
    with pytest.raises(ValueError, match="unknown request type 'nope'"):
        slo_targets(model, ExplicitSLO(targets_ms={"ti2t": 500.0}), None, overrides={"nope": 1.0})
    with pytest.raises(ValueError, match="needs a GPU"):
        slo_targets(model, SoloMultiplierSLO(), None)


def test_parse_overrides() -> None:
    assert parse_overrides(["ti2t=250", "ti2a=1e3"]) == {"ti2t": 250.0, "ti2a": 1000.0}
    for bad in ("ti2t", "=5", "ti2t=-1", "ti2t=abc"):
        with pytest.raises(ValueError, match="TYPE=MILLISECONDS"):
            parse_overrides([bad])
