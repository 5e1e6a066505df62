"""The CLI's catalog commands."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from omniplane import __version__
from omniplane.cli.app import app

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output


def test_show_prints_the_graph() -> None:
    result = runner.invoke(app, ["show", "qwen3-omni"])
    assert result.exit_code == 0, result.output
    for word in ("thinker", "talker", "code2wav", "T+I+V+A->A", "ttfo"):
        assert word in result.output


def test_show_json_has_paths() -> None:
    result = runner.invoke(app, ["show", "qwen2.5-omni", "--json"])
    data = json.loads(result.output)
    paths = {r["name"]: r["path"] for r in data["request_types"]}
    assert paths["v2a"] == ["vision_encoder", "thinker", "talker", "token2wav"]
    assert data["shared_stage"] == "thinker"


def test_show_unknown_model_fails_clearly() -> None:
    result = runner.invoke(app, ["show", "gpt-7"])
    assert result.exit_code == 2
    assert "unknown model 'gpt-7'" in result.output


def test_validate_json_reports_issues(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: workload\nname: w\n")
    result = runner.invoke(app, ["validate", "--json", str(bad)])
    assert result.exit_code == 2  # the status of every user error
    data = json.loads(result.output)
    assert data[0]["valid"] is False
    assert {i["field"] for i in data[0]["issues"]} >= {"model", "arrival"}
