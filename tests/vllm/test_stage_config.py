"""``omniplane vllm-omni config`` without vLLM-Omni: the deploy YAML it writes for every catalog
model vLLM-Omni serves starts from the catalog layout, names omniplane's pipeline variant and
classes, and carries settings the scheduler loads (loaded exactly as the scheduler does). That
vLLM-Omni's own loader accepts these files is tested in test_omni_config.py (marker ``omni``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.spec.layout import layout_models
from omniplane.spec.load import load_layout
from omniplane.vllm.omni_pipelines import SCHEDULERS, pipeline_key
from omniplane.vllm.settings import load_settings, load_slo_table
from omniplane.vllm.stage_config import WORKERS, omniplane_config, stock_deploy

TABLE = """kind: omniplane-slo-table
source: "assumption: test table"
classes:
  text: {priority: 0, path: short, slo_s: 0.8}
  audio: {priority: 10, path: long, slo_s: 4.0}
  image: {priority: 20, path: long, slo_s: 30.0}
"""
WRAPPED = ["bagel", "mimo-audio", "qwen2.5-omni", "qwen3-omni"]  # models with an AR / generation stage


def generate(tmp_path: Path, model: str = "qwen2.5-omni", *extra: str) -> dict[str, Any]:
    table = tmp_path / "slo.yaml"
    table.write_text(TABLE)
    out = tmp_path / f"{model}.yaml"
    res = CliRunner().invoke(
        app, ["vllm-omni", "config", "--model", model, "--slo-table", str(table), "--out", str(out), *extra]
    )
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert text.startswith(f"# vLLM-Omni deploy config for {model}") and "&id" not in text
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def test_the_models_with_llm_stages_are_the_ones_written() -> None:
    assert (
        sorted(m for m in layout_models() if any(s.execution in SCHEDULERS for s in load_layout(m).stages))
        == WRAPPED
    )  # type: ignore[union-attr]


@pytest.mark.parametrize("model", WRAPPED)
def test_every_llm_stage_runs_omniplane_with_its_role(tmp_path: Path, model: str) -> None:
    layout = load_layout(model)
    assert layout is not None
    data = generate(tmp_path, model, "--gpu", "H200", "--control", "gpu0")
    assert data["pipeline"] == pipeline_key(layout.model_type)
    by_id = {d["stage_id"]: d for d in data["stages"]}
    assert sorted(by_id) == [s.stage_id for s in layout.stages]
    roles = []
    for st in layout.stages:
        d = by_id[st.stage_id]
        assert d["devices"] == "0"  # one GPU, HorizonServe's setting
        if st.execution not in SCHEDULERS:
            assert "additional_config" not in d and "worker_cls" not in d  # diffusion: stock
            continue
        assert d["worker_cls"] == WORKERS[st.execution] and d["enforce_eager"] is True
        assert d.get("async_scheduling") is False
        s = load_settings(d["additional_config"], {})
        roles.append((s.role, s.slot))
        assert s.control == "gpu0" and s.total_sms == 132 and s.compute_capability == "9.0"
        assert s.stage_outputs == {
            x.stage_id: x.final_output_type for x in layout.stages if x.final_output_type
        }
        if s.role == "downstream":
            assert (
                s.policy == "fcfs" and s.class_source == "metadata" and s.default_class in ("audio", "image")
            )
    assert roles[0] == ("shared", 0)
    assert [r for r in roles[1:]] == [("downstream", i) for i in range(1, len(roles))]
    total = sum(float(d.get("gpu_memory_utilization") or 0) for d in data["stages"])
    assert total <= 0.9 + 1e-9
    # everything else is the stock deploy file's
    stock = layout.deploy
    assert {k: v for k, v in data.items() if k not in ("pipeline", "stages")} == {
        k: v for k, v in stock.items() if k != "stages"
    }


def test_qwen25_memory_shares_are_the_stock_proportions_scaled(tmp_path: Path) -> None:
    data = generate(tmp_path, "qwen2.5-omni", "--memory-budget", "0.85")
    shares = [d["gpu_memory_utilization"] for d in data["stages"]]
    assert shares == pytest.approx([0.8 * 0.85 / 1.75, 0.8 * 0.85 / 1.75, 0.15 * 0.85 / 1.75], abs=1e-3)
    assert "worker_cls" not in data["stages"][0]  # no GPU given: temporal scheduling only
    assert load_settings(data["stages"][0]["additional_config"], {}).total_sms == 0


def test_stock_placement_is_kept_without_single_gpu(tmp_path: Path) -> None:
    data = generate(tmp_path, "qwen3-omni", "--no-single-gpu")
    assert [d["devices"] for d in data["stages"]] == ["0", "1", "1"]  # vLLM-Omni 0.30.0's layout
    assert [d["gpu_memory_utilization"] for d in data["stages"]] == [0.9, 0.6, 0.1]


def test_class_paths_name_real_omniplane_classes() -> None:
    for path in [*SCHEDULERS.values(), *WORKERS.values()]:
        module, cls = path.rsplit(".", 1)
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        assert f"class {cls}(" in Path(spec.origin).read_text()


def test_stock_file_and_errors(tmp_path: Path) -> None:
    layout = load_layout("qwen2.5-omni")
    assert layout is not None
    stock = tmp_path / "stock.yaml"
    stock.write_text(
        yaml.safe_dump({**layout.deploy, "stages": [{**layout.deploy["stages"][0], "max_num_seqs": 4}]})
    )
    data = generate(tmp_path, "qwen2.5-omni", "--stock", str(stock))
    assert data["stages"][0]["max_num_seqs"] == 4 and data["stages"][1] == {
        "stage_id": 1,
        "devices": "0",
        "enforce_eager": True,
        "async_scheduling": False,
        "additional_config": data["stages"][1]["additional_config"],
    }
    runner = CliRunner()
    table = tmp_path / "slo.yaml"
    old = tmp_path / "old.yaml"
    old.write_text("stage_args: [{stage_id: 0}]\n")
    cases = [
        (["--model", "qwen3-vl"], "no stock vLLM-Omni layout for 'qwen3-vl'"),
        (["--model", "qwen-image"], "diffusion stages only"),
        (["--model", "qwen2.5-omni", "--gpu", "Z100"], "--gpu"),
        (["--model", "qwen2.5-omni", "--stock", str(old)], "pre-0.2x stage config schema"),
    ]
    for args, message in cases:
        res = runner.invoke(app, ["vllm-omni", "config", "--slo-table", str(table), *args])
        assert res.exit_code == 2 and message in res.output, (args, res.output)
    layout_, deploy, _ = stock_deploy("qwen2.5-omni")
    with pytest.raises(ValueError, match="memory_budget"):
        omniplane_config(layout_, deploy, load_slo_table(yaml.safe_load(TABLE)), memory_budget=2)
