"""scripts/gpu_calibrate.py: its model facts are the catalog's, its dry mode (CPU, tiny shapes,
synthetic timings) runs the whole pipeline (sweep, two-process harness) and writes a file
``omniplane calibrate --from`` reads, with the harness's ladder the calibration's; without a GPU
it says so and writes nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.gpu.localrun import model_shapes, work_from_model
from omniplane.spec import find_catalog_model, load_model

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_calibrate.py"


def script() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_calibrate", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=240, check=False)


def test_the_scripts_model_facts_are_the_catalogs() -> None:
    mod, spec = script(), load_model(find_catalog_model("qwen2.5-omni"))  # type: ignore[arg-type]
    assert model_shapes(spec) == mod.SHAPES and work_from_model(spec) == mod.WORK
    assert spec.name == mod.MODEL


def test_without_a_gpu_it_says_so_and_writes_nothing(tmp_path: Path) -> None:
    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is available here")
    res = run_script("--out", str(tmp_path / "x.json"))
    assert res.returncode == 2 and "cannot run here" in res.stderr and "--dry" in res.stderr
    assert not (tmp_path / "x.json").exists()


def test_dry_mode_runs_the_pipeline_and_calibrate_reads_it(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "dry.json"
    res = run_script("--dry", "--solo-requests", "3", "--out", str(out))
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert doc["synthetic"] is True and doc["source"].startswith("synthetic:") and doc["script"]["dry"]
    assert doc["shapes"]["shared"]["name"] == "thinker" and doc["shapes"]["shared"]["hidden"] == 64  # tiny
    harness = doc["harness"]
    assert set(harness["policies"]) == {"fcfs", "static-cap", "horizon"} and harness["mps"] is False
    pol, plan = harness["policies"], harness["plan"]
    assert all(p["requests"] > 0 for p in pol.values())
    assert set(pol["fcfs"]["sms_used"]) == {"whole GPU"}  # FCFS: no cap
    assert set(pol["static-cap"]["sms_used"]) == {str(plan["static_cap"])}  # one fixed cap
    # HorizonServe: the whole GPU while the talker idles, a ladder level while it runs
    assert set(pol["horizon"]["sms_used"]) <= {"whole GPU", *map(str, plan["levels"])}
    cal = tmp_path / "cal.json"
    res2 = CliRunner().invoke(app, ["calibrate", "--from", str(out), "--out", str(cal)])
    assert res2.exit_code == 0, res2.output
    assert "synthetic input" in res2.output and "harness horizon" in res2.output
    got = json.loads(cal.read_text())
    assert got["ladder"]["levels"] == plan["levels"] and got["b_sat"] == plan["b_sat"]  # one rule both sides
