"""``omniplane calibrate --run``: section 4.2's measurements through the GPU backend on the fake
driver (cuda-bindings' call sequence, complementary partitions read back) with the fake bench's
deterministic synthetic latencies; the ladder, S_cap (the paper's rule, recomputed here from the
measured points), B_sat and the SLO table derived from them; the deploy config they are written
into loads as the scheduler's settings."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.gpu import GpuUnavailable
from omniplane.gpu.green import CudaStreams
from omniplane.gpu.localrun import SWEEP, model_shapes, work_from_model
from omniplane.gpu.preprocess import derive
from omniplane.gpu.sweep import FakeBench, measure
from omniplane.sched.serving import horizon_config
from omniplane.spec import find_catalog_model, load_model
from omniplane.vllm.settings import load_settings, load_slo_table
from tests.gpu.test_green import FakeDriver, wrap

SPEC = load_model(find_catalog_model("qwen2.5-omni"))  # type: ignore[arg-type]
TYPES = {t: SPEC.request_type(t).output.value for t in SPEC.type_names}


def fake_doc(solo: int = 20) -> dict[str, Any]:
    shared = CudaStreams(SWEEP, role="shared", driver=FakeDriver(), wrap=wrap)
    down = CudaStreams(SWEEP, role="downstream", driver=FakeDriver(), wrap=wrap)
    return measure(FakeBench(132, TYPES), shared, down, model=SPEC.name, gpu="H200", device="fake H200",
                   types=TYPES, solo_requests=solo)


def test_the_sweep_runs_every_partition_through_the_backend() -> None:
    doc = fake_doc()
    assert doc["synthetic"] is True and "NOT measurements" in doc["source"]
    assert doc["backend"]["shared"]["backend"] == "cuda-bindings" and doc["backend"]["shared"]["read_back"]
    sms = [p["sms"] for p in doc["sweep"]["decode"]]
    assert sms == [*range(8, 125, 8), 132]  # every 8-SM partition leaving the other stage 8, then the GPU
    assert [p["down_sms"] for p in doc["corun"][:-1]] == [132 - s for s in sms[:-1]]
    assert all(0 <= p["bw_util"] <= 1 for p in doc["corun"]) and set(doc["solo_ms"]) == set(TYPES)


def test_the_ladder_s_cap_and_slo_table_follow_the_papers_rules() -> None:
    doc = fake_doc()
    cal = derive(doc, SPEC, "fake")
    levels = cal["ladder"]["levels"]
    assert levels == sorted(set(levels)) and all(s % 8 == 0 and 8 <= s < 132 for s in levels)
    # S_cap: the smallest swept count within 5% of the best solo decode time
    pts = {p["sms"]: p["time_ms"] for p in doc["sweep"]["decode"]}
    best = min(pts.values())
    assert cal["s_cap"] == levels[-1] == min(s for s, t in pts.items() if t <= 1.05 * best)
    assert levels[0] == min(s for s, t in pts.items() if t <= 1.10 * best)  # S_min: within 10%
    # below the full-allocation degradation, alone and co-running
    assert pts[cal["s_cap"]] < pts[132] and cal["corun"]["at_cap_ms"] < cal["corun"]["full_ms"]
    assert cal["b_sat"] == max(p["bw_util"] for p in doc["corun"] if p["sms"] < 132)
    # SLO: 5 x the nearest-rank p95 of the class's slowest request type
    p95 = {t: sorted(v)[math.ceil(0.95 * len(v)) - 1] for t, v in doc["solo_ms"].items()}
    table = load_slo_table(cal["slo_table"])
    for cls in ("text", "audio"):
        worst = max(p95[t] for t, o in TYPES.items() if o == cls)
        assert table.classes[cls].slo_s == pytest.approx(5 * worst / 1e3, abs=1e-4)
    assert table.classes["text"].path.value == "short" and table.classes["audio"].priority == 10
    assert table.source.startswith("assumption: synthetic latencies, NOT measured")
    assert cal["ladder"]["source"].startswith("assumption: synthetic latencies, NOT measured")


def test_bad_measurements_name_the_field() -> None:
    doc = fake_doc(solo=3)
    del doc["solo_ms"]["v2a"]
    with pytest.raises(ValueError, match=r"f.json: solo_ms: missing request type\(s\) \['v2a'\]"):
        derive(doc, SPEC, "f.json")
    doc = fake_doc(solo=3)
    doc["sweep"]["decode"][2]["time_ms"] = -1
    with pytest.raises(ValueError, match=r"sweep.decode\[2\].time_ms: expected a positive number"):
        derive(doc, SPEC, "f.json")
    with pytest.raises(ValueError, match="model: the measurements are of 'other'"):
        derive({**doc, "model": "other"}, SPEC, "f.json")


def test_true_shapes_come_from_the_catalog() -> None:
    shapes = model_shapes(SPEC)
    assert shapes["shared"] == {"name": "thinker", "layers": 28, "hidden": 3584, "heads": 28, "kv_heads": 4,
                                "head_dim": 128, "intermediate": 18944, "vocab": 152064}
    assert shapes["downstream"]["name"] == "talker" and shapes["downstream"]["hidden"] == 896
    work = work_from_model(SPEC)
    assert work["t2t"]["down_tokens"] == 0 and work["t2a"]["down_tokens"] > 0
    assert work["v2t"]["prompt_tokens"] > work["t2t"]["prompt_tokens"]  # video tokens in the prompt


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_calibrate_run_writes_a_deploy_config_the_scheduler_loads(tmp_path: Path) -> None:
    d, cal_path = tmp_path / "d.yaml", tmp_path / "cal.json"
    res = run("vllm-omni", "config", "--model", "qwen2.5-omni", "--gpu", "H200", "--out", str(d))
    assert res.exit_code == 0, res.output
    res = run("calibrate", "--run", "--dry", "--model", "qwen2.5-omni", "--gpu", "H200",
              "--out", str(cal_path), "--deploy", str(d))
    assert res.exit_code == 0, res.output
    assert "synthetic input" in res.output and "S_cap" in res.output
    cal = json.loads(cal_path.read_text())
    text = d.read_text()
    assert "# Calibrated: omniplane calibrate (SYNTHETIC" in text and "uncalibrated" not in text
    stages = [s for s in yaml.safe_load(text)["stages"] if "omniplane" in s.get("additional_config", {})]
    settings = [load_settings(s["additional_config"], {}) for s in stages]
    assert len(settings) == 3 and settings[0].role == "shared" and settings[0].policy == "horizon"
    for st in settings:
        assert st.ladder.levels == cal["ladder"]["levels"] and st.total_sms == 132
        assert st.classes["text"].slo_s == cal["slo_table"]["classes"]["text"]["slo_s"]
    assert horizon_config(settings[0].policy_options).spatial.b_sat == cal["b_sat"]
    # the saved measurement gives the same calibration again
    again = run("calibrate", "--from", str(tmp_path / "m.json"))
    assert again.exit_code == 2
    (tmp_path / "m.json").write_text(json.dumps(cal["measurement"]))
    again = run("calibrate", "--from", str(tmp_path / "m.json"), "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["ladder"]["levels"] == cal["ladder"]["levels"]


def test_run_without_a_gpu_says_so(tmp_path: Path) -> None:
    from omniplane.gpu.backends import make_streams
    from omniplane.sched.ladder import partition_rule

    try:
        make_streams("auto", SWEEP, role="shared", device=0, total_sms=0, rule=partition_rule(9, 0))
        pytest.skip("a GPU backend works here")
    except GpuUnavailable:
        pass
    res = run("calibrate", "--run", "--model", "qwen2.5-omni")
    assert res.exit_code == 2 and "no GPU to calibrate on here" in res.output and "--dry" in res.output
    assert run("calibrate", "--dry", "--from", str(tmp_path)).exit_code == 2
    assert "give one of --run" in run("calibrate").output


def test_the_local_device_is_recognised_as_a_catalog_gpu() -> None:
    from omniplane.gpu.localrun import catalog_kind

    got = catalog_kind("NVIDIA H200 (132 SMs, cc 9.0)", 132)
    assert got is not None and got.name == "H200"
    assert catalog_kind("NVIDIA H200", 114) is None and catalog_kind("Some GPU", 132) is None
