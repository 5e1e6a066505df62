"""Shared fixtures: catalog GPUs and cost models (loaded once per session; read-only)."""

from __future__ import annotations

import pytest

from omniplane.perf import CostModel
from omniplane.spec import GPUCatalog, ModelSpec, catalog_gpus_path, find_catalog_model, load_gpus, load_model

MODELS = ("qwen3-omni", "qwen2.5-omni", "bagel", "mimo-audio", "qwen-image", "qwen3-vl", "internvl3",
          "qwen2.5-vl")


@pytest.fixture(scope="session")
def gpus() -> GPUCatalog:
    return load_gpus(catalog_gpus_path())


@pytest.fixture(scope="session")
def specs() -> dict[str, ModelSpec]:
    out = {}
    for name in MODELS:
        path = find_catalog_model(name)
        assert path is not None
        out[name] = load_model(path)
    return out


@pytest.fixture(scope="session")
def costs(specs: dict[str, ModelSpec]) -> dict[str, CostModel]:
    # the roofline alone: physics tests (runtime overheads are tested in test_runtime.py)
    return {name: CostModel(spec, runtime="roofline") for name, spec in specs.items()}
