"""The core layers never import torch, CUDA, vLLM or Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE = [
    "omniplane.spec",
    "omniplane.workload",
    "omniplane.perf",
    "omniplane.perf.profiler",
    "omniplane.perf.validation.report",
    "omniplane.plan",
    "omniplane.plan.pipeline",
    "omniplane.cli.plan",
    "omniplane.cli.app",
]
FORBIDDEN = ["torch", "vllm", "ray", "cuda", "pynvml", "vllm_omni"]


@pytest.mark.parametrize("module", CORE)
def test_core_import_pulls_in_no_runtime(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"
