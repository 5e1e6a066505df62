"""``omniplane perf ...`` and ``omniplane profile`` end to end."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.perf import ProfileSet
from tests.perf.sse_server import Delays, serve_in_subprocess

runner = CliRunner()


def test_perf_validate_json_is_one_document() -> None:
    res = runner.invoke(app, ["perf", "validate", "--json", "--no-transfer", "--no-table3"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert len(doc["points"]) >= 25 and doc["summary"]["held-out"]["all"]["median_abs_err"] <= 0.15


def test_perf_validate_text_lists_the_points() -> None:
    res = runner.invoke(app, ["perf", "validate", "--no-transfer", "--no-table3"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "splitwise/bloom-176b" in res.output and "co-location" in res.output
    assert "Cornfigurator Table 2" in res.output and "Qwen3-Omni report" in res.output


def test_perf_solo_json() -> None:
    res = runner.invoke(app, ["perf", "solo", "qwen2.5-omni", "--gpu", "h100", "--n", "20", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["tp"] == 1 and {t["type"] for t in doc["types"]} >= {"t2t", "t2a"}
    assert all(0 < t["p50_ms"] <= t["p95_ms"] for t in doc["types"])


def test_perf_solo_errors_are_clear() -> None:
    res = runner.invoke(app, ["perf", "solo", "qwen-image", "--gpu", "L40S", "--n", "5"])
    assert res.exit_code == 2 and "does not fit on L40S" in res.output
    res = runner.invoke(app, ["perf", "solo", "qwen-image", "--gpu", "TPU"])
    assert res.exit_code == 2 and "unknown GPU kind" in res.output


def test_profile_writes_a_table(tmp_path: Path) -> None:
    out = tmp_path / "p.csv"
    with serve_in_subprocess(Delays(0.05, 0.02, 4, 0.0)) as url:
        res = runner.invoke(app, ["profile", "--url", url, "--model", "fake", "--component", "thinker",
                                  "--gpu", "H100-SXM", "--request", "short:32:4", "--concurrency", "1,2",
                                  "--requests-per-worker", "3", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["table"] == str(out)
    ops = {r.op for r in ProfileSet.load(out).rows}
    assert ops == {"prefill", "decode"}


def test_profile_dead_endpoint_exits_with_a_message(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = runner.invoke(app, ["profile", "--url", f"http://127.0.0.1:{port}", "--model", "m",
                              "--component", "thinker", "--gpu", "H100-SXM",
                              "--out", str(tmp_path / "x.csv")])
    assert res.exit_code == 2 and "cannot reach" in res.output
