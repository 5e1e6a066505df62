"""``omniplane vllm-omni config``: the Qwen2.5-Omni stage config it writes validates against
vLLM-Omni's documented schema, names omniplane's classes, and carries settings the scheduler
loads (checked by loading them exactly as the scheduler does)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.vllm.settings import load_settings, load_slo_table
from omniplane.vllm.stage_config import LAYOUTS, SCHEDULERS, WORKERS, omniplane_config
from tests.vllm.omni_schema import StageConfig

TABLE = """kind: omniplane-slo-table
source: "assumption: test table"
classes:
  text: {priority: 0, path: short, slo_s: 0.8}
  audio: {priority: 10, path: long, slo_s: 4.0}
"""


def generate(tmp_path: Path, *extra: str) -> dict[str, Any]:
    table = tmp_path / "slo.yaml"
    table.write_text(TABLE)
    out = tmp_path / "stages.yaml"
    res = CliRunner().invoke(
        app,
        [
            "vllm-omni",
            "config",
            "--model",
            "qwen2.5-omni",
            "--slo-table",
            str(table),
            "--out",
            str(out),
            *extra,
        ],
    )
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert text.startswith("# vLLM-Omni stage config for qwen2.5-omni") and "&id" not in text
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def test_config_matches_the_documented_schema(tmp_path: Path) -> None:
    cfg = StageConfig.model_validate(generate(tmp_path, "--gpu", "H200"))
    assert [s.engine_args.model_stage for s in cfg.stage_args] == ["thinker", "talker", "code2wav"]
    assert {s.runtime.devices for s in cfg.stage_args} == {"0"}  # one GPU, as in HorizonServe
    assert sum(s.engine_args.gpu_memory_utilization for s in cfg.stage_args) <= 0.9 + 1e-9
    assert all(s.engine_args.enforce_eager for s in cfg.stage_args)
    assert cfg.runtime is not None and [(e.from_, e.to) for e in cfg.runtime.edges] == [(0, 1), (1, 2)]


def test_classes_and_settings_per_stage(tmp_path: Path) -> None:
    data = generate(tmp_path, "--gpu", "H200", "--policy", "fcfs", "--control", "qwen-gpu0")
    stages = data["stage_args"]
    assert [s["engine_args"]["scheduler_cls"] for s in stages] == [
        SCHEDULERS["ar"],
        SCHEDULERS["ar"],
        SCHEDULERS["generation"],
    ]
    assert [s["engine_args"]["worker_cls"] for s in stages] == [
        WORKERS["ar"],
        WORKERS["ar"],
        WORKERS["generation"],
    ]
    settings = [load_settings(s["engine_args"]["additional_config"], {}) for s in stages]
    assert [(s.role, s.slot) for s in settings] == [("shared", 0), ("downstream", 1), ("downstream", 2)]
    assert {s.control for s in settings} == {"qwen-gpu0"} and {s.control_slots for s in settings} == {3}
    assert {s.total_sms for s in settings} == {132} and settings[0].compute_capability == "9.0"
    assert settings[0].classes["audio"].slo_s == 4.0 and settings[0].slo_source == "assumption: test table"
    assert settings[0].sampler == "auto" and settings[1].sampler == "null"


def test_class_paths_name_real_omniplane_classes() -> None:
    for path in [*SCHEDULERS.values(), *WORKERS.values()]:
        module, cls = path.rsplit(".", 1)
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        assert f"class {cls}(" in Path(spec.origin).read_text()


def test_stock_file_and_errors(tmp_path: Path) -> None:
    stock = tmp_path / "stock.yaml"
    stock.write_text(yaml.safe_dump(LAYOUTS["qwen2.5-omni"]))
    data = generate(tmp_path, "--stock", str(stock), "--no-single-gpu")
    assert data["stage_args"][1]["runtime"]["devices"] == "1"  # stock placement kept
    runner = CliRunner()
    (tmp_path / "slo.yaml").write_text(TABLE)
    res = runner.invoke(
        app, ["vllm-omni", "config", "--model", "qwen3-vl", "--slo-table", str(tmp_path / "slo.yaml")]
    )
    assert res.exit_code == 2 and "no stock vLLM-Omni layout" in res.output
    res = runner.invoke(
        app,
        [
            "vllm-omni",
            "config",
            "--model",
            "qwen2.5-omni",
            "--slo-table",
            str(tmp_path / "slo.yaml"),
            "--gpu",
            "Z100",
        ],
    )
    assert res.exit_code == 2 and "--gpu" in res.output
    with pytest.raises(ValueError, match="memory_budget"):
        omniplane_config(LAYOUTS["qwen2.5-omni"], load_slo_table(yaml.safe_load(TABLE)), memory_budget=2)
