"""``omniplane workload show | plot | sample``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.workload import load_requests

runner = CliRunner()


def test_show_trace_json() -> None:
    result = runner.invoke(app, ["workload", "show", "azure-code", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["count"] == 8819 and data["extra"]["format"] == "azure"
    assert data["rate"] > 0 and data["cv"] > 0 and data["duration_s"] > 3000
    assert set(data["sizes"]) == {"prompt_tokens", "output_tokens"}
    assert {"p50", "p90", "p99", "mean"} <= set(data["sizes"]["prompt_tokens"])


def test_show_workload_text_and_json() -> None:
    result = runner.invoke(app, ["workload", "show", "qwen3-omni-servegen", "--n", "400"])
    assert result.exit_code == 0, result.output
    for word in ("requests: 400", "CV of gaps", "tiva2a", "thinker.prompt_tokens"):
        assert word in result.output
    result = runner.invoke(app, ["workload", "show", "qwen3-omni-servegen", "--n", "400", "--json",
                                 "--rate", "10"])
    data = json.loads(result.output)
    assert data["count"] == 400 and abs(sum(data["types"].values()) - 1) < 1e-9
    assert data["extra"]["model"] == "qwen3-omni"


def test_show_servegen_reports_clients_and_published_rate() -> None:
    result = runner.invoke(app, ["workload", "show", "servegen-mm-image", "--json", "--n", "1000"])
    data = json.loads(result.output)
    assert data["extra"]["clients"] == 35
    assert 9.4 < data["extra"]["published_rate_mean"] < 9.55


def test_show_malformed_trace_names_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens\n0,1\n1,-5\n")
    result = runner.invoke(app, ["workload", "show", str(bad)])
    assert result.exit_code == 2
    assert "bad.csv:3" in result.output and "negative value" in result.output


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "w.png"
    result = runner.invoke(app, ["workload", "plot", "qwen3-vl-azure-conv", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sample_writes_replayable_requests(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    result = runner.invoke(app, ["workload", "sample", "qwen3-omni-servegen-trace", "--n", "50",
                                 "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["requests"] == 50
    reqs = load_requests(out)
    assert len(reqs) == 50 and [r.id for r in reqs] == list(range(50))


def test_sample_needs_a_workload(tmp_path: Path) -> None:
    result = runner.invoke(app, ["workload", "sample", "azure-conv", "--n", "5", "--out",
                                 str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2 and "not a workload spec" in result.output
