"""``omniplane fidelity``: argument errors, and the table of an earlier run (``--report``)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.cli.fidelity import _spread
from omniplane.fidelity.compare import METRICS


def doc(repeats: int = 2) -> dict[str, object]:
    meas = dict.fromkeys(METRICS, 100.0)
    sim = {**meas, "ttft_p50_ms": 130.0}
    reps = [{"summary": {**meas, "ttft_p50_ms": v}} for v in (90.0, 110.0)][:repeats]
    return {"engine": {"url": "http://e", "model": "tiny-qwen2", "max_num_seqs": 128,
                       "loads": [{"fraction": 0.3, "repeats": reps}]},
            "loads": [{"offered_rps": 3.0, "measured": meas, "simulated": sim}]}


def test_the_report_prints_errors_against_the_targets(tmp_path: Path) -> None:
    path = tmp_path / "fidelity.json"
    path.write_text(json.dumps(doc()))
    out = CliRunner().invoke(app, ["fidelity", "--report", str(path)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "+30.0%" in out.output and "TTFT p50 ms within 15%: NO" in out.output
    assert "throughput req/s within 10%: yes" in out.output
    assert "repeats spread" in out.output


def test_the_report_splits_a_replays_cores_into_api_server_and_engine_core(tmp_path: Path) -> None:
    d = doc(repeats=1)
    cpu = {"worker": 1.0, "worker_wait": 0.0, "server": 0.75, "server_wait": 1.5, "api": 0.25,
           "api_wait": 0.5, "client": 0.5, "client_wait": 0.125}
    d["engine"]["loads"][0]["repeats"][0]["cpu_cores"] = cpu  # type: ignore[index]
    path = tmp_path / "fidelity.json"
    path.write_text(json.dumps(d))
    out = CliRunner().invoke(app, ["fidelity", "--report", str(path)], env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    # the engine core is the engine group's non-worker processes less the API server (its leader)
    assert "API server 0.25 / 0.5, engine core 0.5 / 1" in out.output
    assert "client 0.5 / 0.125" in out.output


def test_the_spread_of_repeated_replays_is_the_noise_floor() -> None:
    [row] = _spread(doc())
    assert row["ttft_p50_ms"] == 20.0 / 110.0 and row["tpot_p50_ms"] == 0.0
    assert _spread(doc(repeats=1)) == []


def test_argument_errors_are_clear(tmp_path: Path) -> None:
    r = CliRunner()
    assert "exactly one of --url URL and --fixture" in r.invoke(app, ["fidelity"]).output
    out = r.invoke(app, ["fidelity", "--url", "http://127.0.0.1:9", "--loads", "0.3,x"]).output
    assert "--loads must be comma-separated" in out
    assert "--workload is required" in r.invoke(app, ["fidelity", "--url", "http://127.0.0.1:9"]).output
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    assert "not a fidelity document" in r.invoke(app, ["fidelity", "--report", str(bad)]).output
