"""The default ``omniplane vllm-omni config --model qwen2.5-omni --gpu H200`` (HorizonServe on,
a derived SLO table, an uncalibrated ladder) against the installed vLLM-Omni: its own loader
accepts the file, and omniplane's scheduler class builds HorizonServe from the shared stage's
settings on that ladder (marker ``omni``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm_omni")
pytestmark = pytest.mark.omni

from typer.testing import CliRunner  # noqa: E402
from vllm_omni.engine.stage_init_utils import build_engine_args_dict_from_omni_stage_config  # noqa: E402

from omniplane.cli.app import app  # noqa: E402
from omniplane.sched.horizon import HorizonServe  # noqa: E402
from omniplane.vllm.omni_scheduler import OmniplaneOmniARScheduler  # noqa: E402
from omniplane.vllm.settings import load_settings  # noqa: E402
from tests.vllm.harness import make_scheduler  # noqa: E402
from tests.vllm.omni_loader import resolve  # noqa: E402
from tests.vllm.test_horizon_default import config  # noqa: E402


@pytest.mark.parametrize("calibrated", [False, True], ids=["default", "calibrated"])
def test_the_default_config_loads_and_builds_horizonserve(tmp_path: Path, configs: dict[str, Any],
                                                          calibrated: bool) -> None:
    res, _, data = config(tmp_path, "--gpu", "H200")
    assert data is not None, res.output
    if calibrated:  # omniplane calibrate --run --dry --deploy: the calibrated ladder, SLO table, B_sat
        res = CliRunner().invoke(app, ["calibrate", "--run", "--dry", "--model", "qwen2.5-omni",
                                       "--gpu", "H200", "--deploy", str(tmp_path / "d.yaml")])
        assert res.exit_code == 0, res.output
    resolved, hf = resolve("qwen2.5-omni", tmp_path / "d.yaml", tmp_path)
    args = build_engine_args_dict_from_omni_stage_config(resolved.stage_configs[0], hf)
    settings = load_settings(args["additional_config"], {})
    assert settings.policy == "horizon" and settings.ladder.levels
    assert settings.ladder.source is not None and ("NOT measured" in settings.ladder.source) == calibrated
    if calibrated:
        assert isinstance(settings.policy_options["b_sat"], float)
    stage0 = {**args["additional_config"]["omniplane"], "control": None}
    sched = make_scheduler(OmniplaneOmniARScheduler, configs["fcfs"], stage0)
    policy = sched.omniplane.bridge.policy
    assert isinstance(policy, HorizonServe)
    assert list(sched.omniplane.control.ladder.levels) == settings.ladder.levels
    throttle = sched.omniplane.throttle
    if throttle.enabled:  # a GPU here: the policy caps on the written ladder
        assert list(policy.spatial.ladder.levels) == settings.ladder.levels
    else:  # no GPU here: the checks failed closed, the temporal scheduler runs uncapped
        assert throttle.reason and policy.spatial.config.throttle is False
