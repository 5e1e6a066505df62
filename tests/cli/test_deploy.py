"""``omniplane deploy --dry-run``, ``loadgen`` and ``rehearse`` argument handling (no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.spec.catalog import catalog_dir

PLAN = str(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
runner = CliRunner()


def test_dry_run_lists_deployments_and_writes_vllm_omni_configs(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["deploy", PLAN, "--engine", "vllm-omni", "--dry-run", "--config-dir", str(tmp_path), "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert [(d["deployment"], d["replicas"], d["gpus_per_replica"]) for d in out["deployments"]] == [
        ("aud-g0", 1, 1),
        ("front-g0", 4, 1),
        ("back-g0", 11, 1),
    ]
    assert sorted(Path(p).name for p in out["stage_configs"]) == [
        "aud-g0.yaml",
        "back-g0.yaml",
        "front-g0.yaml",
    ]
    assert all(Path(p).is_file() for p in out["stage_configs"])


def test_unknown_engine_and_node_are_refused() -> None:
    res = runner.invoke(app, ["deploy", PLAN, "--engine", "tensorrt", "--dry-run"])
    assert res.exit_code == 2 and "emulated, vllm-omni" in res.output
    res = runner.invoke(
        app,
        [
            "rehearse",
            PLAN,
            "--workload",
            "qwen3-omni-servegen",
            "--duration",
            "5",
            "--kill-replica",
            "middle",
        ],
    )
    assert res.exit_code == 2 and "aud, front, back" in res.output


def test_loadgen_against_nothing_counts_every_request_lost() -> None:
    res = runner.invoke(
        app,
        [
            "loadgen",
            "--url",
            "http://127.0.0.1:9",
            "--workload",
            "qwen3-omni-servegen",
            "--duration",
            "2",
            "--rate",
            "3",
            "--gpu",
            "A100-80GB",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["sent"] > 0 and out["lost"] == out["sent"] and out["completed"] == 0


def test_loadgen_needs_a_gpu_for_solo_slos() -> None:
    res = runner.invoke(
        app,
        ["loadgen", "--url", "http://127.0.0.1:9", "--workload", "qwen3-omni-servegen", "--duration", "1"],
    )
    assert res.exit_code == 2 and "--gpu" in res.output
