"""Calibration from a GPU check, on the shipped synthetic example: values generated from the
co-location model with kappa 0.15, delta 0.12, x0 0.55 and a co-runner at 0.6 of effective
bandwidth (2% noise), so the fit must recover those inputs; plus the CLI and bad files."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.gpu.calibrate import calibrate
from omniplane.perf.colocation_fit import load_fit
from omniplane.sched.calibration import S_MIN_SLOWDOWN, gpu_rule
from omniplane.spec import load_gpus

EXAMPLE = Path(str(files("omniplane.gpu") / "data" / "gpu_check_synthetic.json"))


def test_example_is_marked_synthetic() -> None:
    data = json.loads(EXAMPLE.read_text())
    assert data["synthetic"] is True and data["source"].startswith("synthetic:")


def test_fit_recovers_the_generating_parameters() -> None:
    doc = calibrate(EXAMPLE)
    assert doc["synthetic"] is True and doc["gpu"] == "H200"
    assert doc["params"]["kappa"] == pytest.approx(0.15, rel=0.15)
    assert doc["params"]["delta"] == pytest.approx(0.12, rel=0.25)
    assert doc["params"]["x0"] == pytest.approx(0.55, abs=0.05)
    assert doc["corun_pressure"] == pytest.approx(0.6, abs=0.05)
    lad = doc["ladder"]
    # a memory-bound kernel gets within 5% of its best between ~2 and ~4 kappa of the SMs (40-80
    # of 132; the 2% noise decides which step)
    assert 40 <= lad["s_cap"] <= 80 and lad["levels"][-1] == lad["s_cap"]
    assert lad["kernel"] == "membound"
    # the offline calibration's rule on the same sweep: S_min = the fewest SMs within 10% of the
    # best solo time (at most S_cap), every level one of H200's partitions
    h200 = load_gpus().get("H200")
    solo: dict[int, float] = {}
    for p in json.loads(EXAMPLE.read_text())["points"]:
        if p["kernel"] == "membound" and not p.get("corun") and p.get("time_ms") is not None:
            solo[int(p["sms"])] = min(solo.get(int(p["sms"]), float("inf")), float(p["time_ms"]))
    best = min(solo.values())
    within = [s for s, t in solo.items() if t <= (1 + S_MIN_SLOWDOWN) * best]
    assert lad["s_min"] == gpu_rule(h200).snap_down(min(within)) <= lad["s_cap"]
    assert all(s % 8 == 0 for s in lad["levels"]) and lad["levels"][0] == lad["s_min"]


def test_cli_writes_a_fit_perf_can_load(tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    res = CliRunner().invoke(app, ["calibrate", "--from", str(EXAMPLE), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ladder"]["s_cap"] == json.loads(out.read_text())["ladder"]["s_cap"]
    params, scales, pressure = load_fit(out)
    assert 0 < params.x0 <= 1 and set(scales) == {"membound", "compute"} and pressure > 0
    human = CliRunner().invoke(app, ["calibrate", "--from", str(EXAMPLE)])
    assert "synthetic input" in human.output and "S_cap" in human.output


def test_bad_files_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "something"}))
    res = CliRunner().invoke(app, ["calibrate", "--from", str(bad)])
    assert res.exit_code == 2 and "kind" in res.output
    bad.write_text("{not json")
    res = CliRunner().invoke(app, ["calibrate", "--from", str(bad)])
    assert res.exit_code == 2 and "not JSON" in res.output
