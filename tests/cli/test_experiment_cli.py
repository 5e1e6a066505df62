"""`experiment horizon`: the CLI's static choices match the scheduler's, every finished point is
kept as it finishes, and an interrupted sweep resumes from them with the same results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from omniplane.cli import experiment as cli_ex
from omniplane.cli.app import app
from omniplane.repro.horizon import experiment as ex
from omniplane.sched.factory import POLICIES

ARGS = ["experiment", "horizon", "--policies", "vanilla,edf", "--xs", "0.2,0.3", "--requests", "20",
        "--json"]


def test_static_choices_are_the_schedulers() -> None:
    assert cli_ex.MODELS == ex.MODELS
    assert tuple(ex.GPUS.values()) == cli_ex.TESTBEDS
    assert cli_ex.SWEEPS == ex.SWEEPS
    assert cli_ex.POLICIES == POLICIES


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def run(args: list[str]) -> Any:
    return CliRunner().invoke(app, args)


def test_points_are_kept_and_an_interrupted_sweep_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv("OMNIPLANE_PROGRESS", "0")
    points = tmp_path / "points.jsonl"
    full = run([*ARGS, "--points", str(points)])
    assert full.exit_code == 0, full.output
    first = json.loads(full.stdout)
    log = lines(points)
    assert "key" in log[0] and len(log) == 5  # header + 2 policies x 2 rates
    assert {(p["policy"], p["rate"]) for p in log[1:]} == {(p, x) for p in ("vanilla", "edf")
                                                            for x in (0.2, 0.3)}

    # interrupted: two points finished, the third cut while being written
    text = points.read_text().splitlines()
    points.write_text("\n".join(text[:3]) + "\n" + text[3][:25])
    calls: list[float] = []
    real = ex._run_point

    def counted(task: Any) -> Any:
        calls.append(task[2])
        return real(task)

    monkeypatch.setattr(ex, "_run_point", counted)
    again = run([*ARGS, "--points", str(points)])
    assert again.exit_code == 0, again.output
    assert "resuming: 2 of 4 runs" in again.stderr
    assert len(calls) == 2  # only the points not finished before
    second = json.loads(again.stdout)
    assert second["policies"] == first["policies"]
    assert second["meta"]["resumed_runs"] == 2
    assert len(lines(points)) == 5


def test_ctrl_c_keeps_finished_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNIPLANE_PROGRESS", "0")
    points = tmp_path / "points.jsonl"
    real = ex._run_point
    done: list[int] = []

    def interrupt_third(task: Any) -> Any:
        if len(done) == 2:
            raise KeyboardInterrupt
        done.append(1)
        return real(task)

    monkeypatch.setattr(ex, "_run_point", interrupt_third)
    res = run([*ARGS, "--points", str(points)])
    assert res.exit_code == 130 and "interrupted" in res.stderr
    assert len(lines(points)) == 3  # header + the two finished points
    monkeypatch.setattr(ex, "_run_point", real)
    res = run([*ARGS, "--points", str(points)])
    assert res.exit_code == 0 and "resuming: 2 of 4 runs" in res.stderr


def test_other_settings_do_not_reuse_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNIPLANE_PROGRESS", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert run(ARGS).exit_code == 0
    res = run([*ARGS[:-2], "30", "--json"])  # --requests 30: another sweep
    assert res.exit_code == 0 and "resuming" not in res.stderr
    res = run(ARGS)  # the first again: all four from the default points file
    assert res.exit_code == 0 and "resuming: 4 of 4 runs" in res.stderr
    assert len(list((tmp_path / "cache" / "omniplane" / "horizon").glob("*.jsonl"))) == 2
