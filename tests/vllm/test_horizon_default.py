"""``omniplane vllm-omni config`` switches HorizonServe on where it can act: with only a GPU kind
it writes ``horizon``, an SM ladder the GPU's compute capability allows (labelled uncalibrated)
and an SLO table derived from the performance model's solo p95 (labelled derived); without a
GPU it writes ``fcfs`` and says why, and refuses an SM policy. (vLLM-Omni's loader and the
scheduler class on such a file: test_omni_horizon_default.py, marker ``omni``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.perf import CostModel
from omniplane.perf.solo import solo_percentiles
from omniplane.sched.ladder import partition_rule
from omniplane.spec import find_catalog_model, load_gpus, load_model
from omniplane.vllm.deploy_defaults import UNCALIBRATED
from omniplane.vllm.settings import load_settings


def config(tmp_path: Path, *args: str) -> tuple[Any, str, dict[str, Any] | None]:
    out = tmp_path / "d.yaml"
    cmd = ["vllm-omni", "config", "--model", "qwen2.5-omni", "--out", str(out), *args]
    res = CliRunner().invoke(app, cmd)
    if res.exit_code != 0:
        return res, "", None
    text = out.read_text()
    return res, text, yaml.safe_load(text)


def stage_settings(data: dict[str, Any]) -> list[Any]:
    return [load_settings(d["additional_config"], {}) for d in data["stages"] if "additional_config" in d]


def test_a_gpu_alone_gives_horizon_a_realisable_ladder_and_a_derived_slo_table(tmp_path: Path) -> None:
    res, text, data = config(tmp_path, "--gpu", "H200")
    assert data is not None, res.output
    shared, *down = stage_settings(data)
    assert shared.policy == "horizon" and shared.role == "shared" and all(s.policy == "fcfs" for s in down)
    rule = partition_rule(9, 0)
    levels = shared.ladder.levels
    assert levels and all(rule.valid(s) and s < 132 for s in levels), levels  # 8-SM groups below 132
    assert shared.total_sms == 132 and shared.compute_capability == "9.0"
    assert all(s.ladder.levels == levels for s in down)  # the downstream workers take the complements
    assert shared.ladder.source is not None and shared.ladder.source.startswith(UNCALIBRATED)
    assert "# SM ladder" in text and UNCALIBRATED in text
    # the SLO table: 5 x the largest solo p95 of each class's request types, as `perf solo` prints it
    spec = load_model(find_catalog_model("qwen2.5-omni"))  # type: ignore[arg-type]
    p95, _ = solo_percentiles(spec, CostModel(spec), load_gpus().get("H200"), 95.0)
    text_p95 = max(v for t, v in p95.items() if spec.request_type(t).output.value == "text")
    audio_p95 = max(v for t, v in p95.items() if spec.request_type(t).output.value == "audio")
    assert sorted(shared.classes) == ["audio", "text"]
    assert shared.classes["text"].slo_s == pytest.approx(5 * text_p95, rel=1e-3)
    assert shared.classes["audio"].slo_s == pytest.approx(5 * audio_p95, rel=1e-3)
    assert shared.classes["text"].path.value == "short" and shared.classes["audio"].priority == 10
    assert shared.slo_source.startswith("derived:") and "omniplane perf solo qwen2.5-omni --gpu H200" in (
        shared.slo_source
    )


def test_fcfs_stays_one_option_away_and_a_given_table_wins(tmp_path: Path) -> None:
    table = tmp_path / "slo.yaml"
    table.write_text(
        'kind: omniplane-slo-table\nsource: "assumption: test"\n'
        "classes:\n  text: {priority: 0, path: short, slo_s: 0.8}\n"
        "  audio: {priority: 10, path: long, slo_s: 4.0}\n"
    )
    res, _, data = config(tmp_path, "--gpu", "H200", "--policy", "fcfs", "--slo-table", str(table))
    assert data is not None, res.output
    shared = stage_settings(data)[0]
    assert shared.policy == "fcfs" and shared.classes["text"].slo_s == 0.8
    assert shared.slo_source == "assumption: test"


def test_without_a_gpu_fcfs_is_written_with_the_reason(tmp_path: Path) -> None:
    res, text, data = config(tmp_path)
    assert data is not None, res.output
    shared = stage_settings(data)[0]
    assert shared.policy == "fcfs" and shared.total_sms == 0 and shared.ladder.levels is None
    assert "# policy: fcfs (not horizon: no --gpu, so no SM ladder can be made" in text
    assert "no SM ladder can be made" in res.output  # said on the terminal too


def test_an_sm_policy_without_a_gpu_is_refused_naming_the_option(tmp_path: Path) -> None:
    res, _, data = config(tmp_path, "--policy", "horizon")
    assert data is None and res.exit_code == 2
    assert "--policy horizon" in res.output and "--gpu" in res.output and "Traceback" not in res.output
