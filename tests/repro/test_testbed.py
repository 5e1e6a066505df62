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
from omniplane.repro.horizon.testbed import (
    BANDWIDTH_TESTBED,
    FIT_RATES,
    TESTBED_RUNTIME,
    ScaledDRAM,
    bandwidth_calibration,
    bandwidth_data_path,
    data_path,
    resolve,
    scaled_calibration,
)
from omniplane.repro.horizon.testbed import testbed_runtime as make_testbed_runtime  # not collected as a test
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
    rt = make_testbed_runtime()
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
    bed = CostModel(model, runtime=make_testbed_runtime())
    rt = bed.runtime
    for name in ("RTX6000Ada", "A100-80GB"):
        cfg = ExecutorConfig(gpus.get(name), 1, 4)
        delta = bed.decode_step_time("thinker", cfg, 2, 500) - vllm.decode_step_time("thinker", cfg, 2, 500)
        assert delta == pytest.approx(rt.step_s_on(name) - rt.step_s, abs=1e-9)
    bad = tmp_path / "rt.json"
    bad.write_text(json.dumps({"step_s_by_gpu": {"RTX6000Ada": "fast"}}))
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        make_testbed_runtime(path=bad)


# ---- vllm-omni-paper-bandwidth: achieved DRAM bandwidth per GPU kind --------------
def test_scaled_calibration_lowers_only_the_named_kinds_memory_and_rejects_above_physics() -> None:
    base = load_calibration()
    cal = scaled_calibration({"RTX6000Ada": 0.5}, base)
    ada, a100 = cal.for_gpu("RTX6000Ada"), cal.for_gpu("A100-80GB")
    assert ada.memory == pytest.approx(0.5 * base.for_gpu("RTX6000Ada").memory)
    shipped = base.for_gpu("RTX6000Ada")
    assert (ada.compute, ada.layer_s, ada.per_seq_s) == (shipped.compute, shipped.layer_s, shipped.per_seq_s)
    assert a100 == base.for_gpu("A100-80GB")  # other kinds untouched
    assert base.for_gpu("RTX6000Ada").memory > ada.memory  # the shipped calibration is not mutated
    assert "x 0.5000" in cal.entry("RTX6000Ada").source_of("memory")  # provenance says it was scaled
    for bad in (1.2, 0.0, -0.1, "half", True):
        with pytest.raises(ValueError, match=r"by_gpu\.RTX6000Ada: expected a number in \(0, 1\]"):
            scaled_calibration({"RTX6000Ada": bad}, base)


def test_bandwidth_testbed_slows_the_memory_bound_decode_and_never_draws_above_the_dram() -> None:
    from omniplane.perf import ColocationModel

    model, gpus = load_model("qwen2.5-omni"), load_gpus()
    ada = gpus.get("RTX6000Ada")
    cfg = ExecutorConfig(ada, 1, 4)
    vllm = CostModel(model, runtime="vllm")
    slow = CostModel(model, runtime="vllm", calibration=scaled_calibration({"RTX6000Ada": 0.5}))
    t_fast, t_slow = (c.decode_step_time("thinker", cfg, 4, 600) for c in (vllm, slow))
    host = slow.runtime.step_s_on("RTX6000Ada")
    # the kernel part (not the host time) grows, by at most 1 / scale (memory-bound at most)
    assert t_fast - host < t_slow - host <= 2.0 * (t_fast - host) + 1e-9
    col = ColocationModel()
    work = slow.llm_iteration_work("thinker", cfg, decode_batch=4, decode_context=600)
    for sms in (40, 80, ada.sms):
        fast_t = col.stage(work, ada, sms, eff=vllm.efficiency(cfg))
        slow_t = col.stage(work, ada, sms, eff=slow.efficiency(cfg))
        assert slow_t.time_s > fast_t.time_s  # the co-location model sees the lower bandwidth too
        assert slow_t.bandwidth <= fast_t.bandwidth <= col.capacity(ada) + 1e-6


def test_bandwidth_testbed_is_fitted_to_two_rates_per_gpu_and_reads_bad_files_clearly(tmp_path: Path) -> None:
    data = json.loads(bandwidth_data_path().read_text())
    cal = bandwidth_calibration()
    base = load_calibration()
    assert set(data["memory_scale_by_gpu"]) == {"RTX6000Ada", "RTXPRO6000"}
    for fit in data["fits"]:
        assert [p["rate"] for p in fit["points"]] == list(FIT_RATES)
        assert 0.0 < fit["memory_scale"] <= 1.0
        assert cal.for_gpu(fit["gpu"]).memory == pytest.approx(
            base.for_gpu(fit["gpu"]).memory * data["memory_scale_by_gpu"][fit["gpu"]])
    assert resolve(BANDWIDTH_TESTBED) == ("vllm", resolve(BANDWIDTH_TESTBED)[1])
    assert resolve("vllm") == ("vllm", None)
    bad = tmp_path / "bw.json"
    bad.write_text(json.dumps({"memory_scale_by_gpu": {"RTXPRO6000": 3.0}}))
    with pytest.raises(ValueError, match=re.escape(str(bad)) + r".*RTXPRO6000.*\(0, 1\]"):
        bandwidth_calibration(path=bad)


def test_scaled_dram_lowers_the_shared_capacity_so_co_runners_cannot_exceed_it() -> None:
    from omniplane.perf import ColocationModel

    model, gpus = load_model("qwen2.5-omni"), load_gpus()
    pro = gpus.get("RTXPRO6000")
    cfg = ExecutorConfig(pro, 1, 4)
    slow = CostModel(model, runtime="vllm", calibration=scaled_calibration({"RTXPRO6000": 0.5}))
    eff = slow.efficiency(cfg)
    base, dram = ColocationModel(), ScaledDRAM({"RTXPRO6000": 0.5})
    assert dram.capacity(pro) == pytest.approx(0.5 * base.capacity(pro))
    assert dram.capacity(gpus.get("A100-80GB")) == base.capacity(gpus.get("A100-80GB"))
    thinker = slow.llm_iteration_work("thinker", cfg, decode_batch=4, decode_context=2400)
    talker = slow.llm_iteration_work("talker", cfg, decode_batch=4, decode_context=2400)
    # alone, the scaled DRAM does not bind (the stage's own pull is scaled alike): same time
    alone = base.stage(thinker, pro, 80, eff=eff).time_s
    assert dram.stage(thinker, pro, 80, eff=eff).time_s == pytest.approx(alone)
    # co-running, the pair shares the smaller capacity: slower than on the unscaled DRAM, never above it
    a0, b0 = base.pair(thinker, 80, talker, pro.sms - 80, pro, eff=eff)
    a1, b1 = dram.pair(thinker, 80, talker, pro.sms - 80, pro, eff=eff)
    assert a1.time_s >= a0.time_s and b1.time_s >= b0.time_s
    assert a1.time_s + b1.time_s > a0.time_s + b0.time_s  # it binds here (not a no-op)
    assert a1.bandwidth + b1.bandwidth <= dram.capacity(pro) * (1 + 1e-9)
    with pytest.raises(ValueError, match=r"ScaledDRAM\.RTXPRO6000: expected a number in \(0, 1\]"):
        ScaledDRAM({"RTXPRO6000": 1.5})
