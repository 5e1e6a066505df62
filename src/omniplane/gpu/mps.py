"""MPS for the baselines (HorizonServe's MPS and EDF+MPS): stage processes share the GPU
through NVIDIA's Multi-Process Service, each optionally limited by
``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (a share of the SMs its kernels may occupy,
https://docs.nvidia.com/deploy/mps/index.html). The paper's MPS baseline sets no limit
(runtime-managed sharing); a percentage per stage gives a static split to compare against.

The control daemon must run (``nvidia-cuda-mps-control -d``) before the stages start; without a
GPU or the daemon binary :class:`MpsLauncher` raises :class:`GpuUnavailable`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omniplane.gpu.errors import GpuUnavailable

MPS_PERCENT_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
MPS_PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
MPS_LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
DEFAULT_PIPE_DIR = Path("/tmp/nvidia-mps")  # https://docs.nvidia.com/deploy/mps/index.html (default pipe dir)
CONTROL_BIN = "nvidia-cuda-mps-control"


def mps_env(
    percent: float | None, base: Mapping[str, str] | None = None, *, pipe_dir: Path | None = None
) -> dict[str, str]:
    """The environment of one stage process under MPS: ``base`` (default: this process's)
    plus the thread percentage (None: no limit) and the pipe directory when given."""
    env = dict(os.environ if base is None else base)
    env.pop(MPS_PERCENT_ENV, None)
    if percent is not None:
        if not 0 < percent <= 100:
            raise ValueError(f"{MPS_PERCENT_ENV} must be in (0, 100], got {percent}")
        env[MPS_PERCENT_ENV] = f"{percent:g}"
    if pipe_dir is not None:
        env[MPS_PIPE_ENV] = str(pipe_dir)
    return env


def split_percentages(shared_sms: int, total_sms: int) -> tuple[float, float]:
    """Thread percentages giving the shared stage ``shared_sms`` of ``total_sms`` SMs and the
    downstream stage the rest (rounded up to whole percents, so neither gets less)."""
    if not 0 < shared_sms < total_sms:
        raise ValueError(f"shared_sms must be in (0, {total_sms}), got {shared_sms}")
    a = -(-100 * shared_sms // total_sms)
    b = -(-100 * (total_sms - shared_sms) // total_sms)
    return float(a), float(b)


class MpsLauncher:
    """Starts the MPS control daemon and the stage processes under it."""

    def __init__(self, *, pipe_dir: Path = DEFAULT_PIPE_DIR, control_bin: str = CONTROL_BIN) -> None:
        self.pipe_dir = pipe_dir
        found = shutil.which(control_bin)
        if found is None:
            raise GpuUnavailable(f"MPS: {control_bin} not found on PATH: no NVIDIA driver installed here")
        self.control_bin = found
        if (
            shutil.which("nvidia-smi")
            and subprocess.run(["nvidia-smi", "-L"], capture_output=True, check=False).returncode != 0
        ):
            raise GpuUnavailable("MPS: nvidia-smi lists no GPU")

    def daemon_running(self) -> bool:
        return (self.pipe_dir / "control").exists()

    def start_daemon(self) -> None:
        if self.daemon_running():
            return
        env = mps_env(None, pipe_dir=self.pipe_dir)
        subprocess.run([self.control_bin, "-d"], env=env, check=True)

    def stop_daemon(self) -> None:
        if self.daemon_running():
            subprocess.run(
                [self.control_bin], input=b"quit\n", env=mps_env(None, pipe_dir=self.pipe_dir), check=True
            )

    def launch(
        self,
        cmd: Sequence[str],
        percent: float | None = None,
        base_env: Mapping[str, str] | None = None,
        **popen: Any,
    ) -> subprocess.Popen[bytes]:
        """Start ``cmd`` as an MPS client limited to ``percent`` of the SMs (None: unlimited);
        ``popen`` goes to :class:`subprocess.Popen` (e.g. ``stdout``)."""
        if not self.daemon_running():
            raise GpuUnavailable(f"MPS: no control daemon at {self.pipe_dir} (call start_daemon() first)")
        return subprocess.Popen(list(cmd), env=mps_env(percent, base_env, pipe_dir=self.pipe_dir), **popen)
