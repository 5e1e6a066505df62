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
    "omniplane.sched",
    "omniplane.sched.experiment",
    "omniplane.sched.serving",
    "omniplane.sched.deploy_defaults",
    "omniplane.plan",
    "omniplane.plan.pipeline",
    "omniplane.cli.plan",
    "omniplane.sim",
    "omniplane.control",
    "omniplane.cli.app",
    "omniplane.policy",
    "omniplane.plan.slo",
    "omniplane.loadgen.client",
    "omniplane.loadgen.metrics",
    "omniplane.deploy.local",
    "omniplane.deploy.cluster",
    "omniplane.deploy.ingress",
    "omniplane.deploy.vllm_omni",
    "omniplane.cli.deploy",
    "omniplane.perf.steptime",
    "omniplane.fidelity",
    "omniplane.fidelity.fixture",
    "omniplane.fidelity.loop",
    "omniplane.fidelity.schedlive",
    "omniplane.cli.fidelity",
    "omniplane.deploy.vllm_engine",
]
# Integration packages: they drive torch, CUDA, NVML and vLLM, but import them only when a
# backend is constructed or vLLM loads one of their classes by name.
LAZY = [
    "omniplane.gpu",
    "omniplane.gpu.backends",
    "omniplane.gpu.checks",
    "omniplane.vllm.applier",
    "omniplane.vllm",
    "omniplane.vllm.mixin",
    "omniplane.vllm.worker_mixin",
    "omniplane.vllm.stage_config",
    "omniplane.vllm.omni_patch",
    "omniplane.vllm.lifetime",
    "omniplane.vllm.shmwait",
]
FORBIDDEN = ["torch", "vllm", "ray", "cuda", "pynvml", "vllm_omni"]


@pytest.mark.parametrize("module", CORE + LAZY)
def test_core_import_pulls_in_no_runtime(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"
