"""MPS: per-stage environments and the launcher (with a stand-in control binary)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from omniplane.gpu import GpuUnavailable
from omniplane.gpu.mps import MPS_PERCENT_ENV, MpsLauncher, mps_env, split_percentages


def test_env_sets_and_clears_the_percentage() -> None:
    env = mps_env(37.5, {"A": "1", MPS_PERCENT_ENV: "10"}, pipe_dir=Path("/x"))
    assert env[MPS_PERCENT_ENV] == "37.5" and env["CUDA_MPS_PIPE_DIRECTORY"] == "/x" and env["A"] == "1"
    assert MPS_PERCENT_ENV not in mps_env(None, {MPS_PERCENT_ENV: "10"})
    with pytest.raises(ValueError, match=r"\(0, 100\]"):
        mps_env(0, {})


def test_split_percentages_never_shortchange_either_stage() -> None:
    a, b = split_percentages(64, 132)
    assert a * 132 / 100 >= 64 and b * 132 / 100 >= 68
    with pytest.raises(ValueError):
        split_percentages(132, 132)


def test_launcher_refuses_without_the_daemon_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GpuUnavailable, match="nvidia-cuda-mps-control not found"):
        MpsLauncher()


def test_launcher_passes_the_percentage_to_the_stage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    binary = tmp_path / "bin" / "nvidia-cuda-mps-control"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{binary.parent}{os.pathsep}{os.environ['PATH']}")
    pipe = tmp_path / "pipe"
    launcher = MpsLauncher(pipe_dir=pipe)
    with pytest.raises(GpuUnavailable, match="no control daemon"):
        launcher.launch([sys.executable, "-c", "pass"])
    pipe.mkdir()
    (pipe / "control").touch()
    proc = launcher.launch(
        [sys.executable, "-c", f"import os; print(os.environ['{MPS_PERCENT_ENV}'])"],
        40,
        base_env=dict(os.environ),
        stdout=subprocess.PIPE,
    )
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.decode().strip() == "40"
