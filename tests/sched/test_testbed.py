"""The HorizonServe testbed's runtime (``vllm-omni-paper-testbed``): an environment parameter fitted
per GPU kind to Table 3's Vanilla TPOT at two rates, separate from the planner's runtimes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from omniplane.perf import CostModel
from omniplane.perf.factors import load_calibration
from omniplane.perf.runtime import Runtime
from omniplane.perf.types import ExecutorConfig
from omniplane.sched.testbed import FIT_RATES, TESTBED_RUNTIME, data_path, testbed_runtime
from omniplane.spec import load_gpus, load_model


def test_step_s_by_gpu_overrides_only_the_named_kind_and_round_trips() -> None:
    rt = Runtime("t", "test", step_s=0.005, step_s_by_gpu={"RTX6000Ada": 0.012})
    assert rt.step_s_on("RTX6000Ada") == 0.012
    assert rt.step_s_on("A100-80GB") == 0.005
    back = Runtime.from_json("t", json.loads(json.dumps(rt.to_json())))
    assert back == rt
    with pytest.raises(ValueError, match=r"step_s_by_gpu\.RTX6000Ada"):
        Runtime("t", "test", step_s_by_gpu={"RTX6000Ada": -1.0})


def test_testbed_runtime_is_vllm_plus_the_fitted_host_time_fitted_to_two_rates_per_gpu() -> None:
    vllm = load_calibration().runtime("vllm")
    rt = testbed_runtime()
    assert rt.name == TESTBED_RUNTIME
    assert not vllm.step_s_by_gpu  # the planner's / issue 13's runtime is untouched
    for f in ("step_s", "mtp_pass_s", "vocoder_call_s", "layer_s", "mtp_batched", "vocoder_chunk_frames"):
        assert getattr(rt, f) == getattr(vllm, f), f
    data = json.loads(data_path().read_text())
    assert set(rt.step_s_by_gpu) == {"RTX6000Ada", "RTXPRO6000"}
    for fit in data["fits"]:  # never one point: both of Figure 8's rate ends, each with its residual
        assert [p["rate"] for p in fit["points"]] == list(FIT_RATES)
        assert all(isinstance(p["residual"], float) for p in fit["points"])
        assert rt.step_s_by_gpu[fit["gpu"]] == pytest.approx(fit["step_s"], abs=1e-6)


def test_testbed_runtime_moves_decode_steps_on_its_gpus_only(tmp_path: Path) -> None:
    model, gpus = load_model("qwen2.5-omni"), load_gpus()
    vllm = CostModel(model, runtime="vllm")
    bed = CostModel(model, runtime=testbed_runtime())
    rt = bed.runtime
    for name in ("RTX6000Ada", "A100-80GB"):
        cfg = ExecutorConfig(gpus.get(name), 1, 4)
        delta = bed.decode_step_time("thinker", cfg, 2, 500) - vllm.decode_step_time("thinker", cfg, 2, 500)
        assert delta == pytest.approx(rt.step_s_on(name) - rt.step_s, abs=1e-9)
    bad = tmp_path / "rt.json"
    bad.write_text(json.dumps({"step_s_by_gpu": {"RTX6000Ada": "fast"}}))
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        testbed_runtime(path=bad)
