"""Shared fixtures: the catalog Qwen3-Omni plan and a 3-node test plan, the workload, costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from omniplane.deploy.cluster import prefer_loopback
from omniplane.perf import CostModel
from omniplane.spec import ResolvedPlan, ResolvedWorkload, find_catalog_workload, load_plan, load_workload
from omniplane.spec.catalog import catalog_dir

prefer_loopback()  # the local Ray cluster of test_serve.py on 127.0.0.1 (before Ray is imported)

HERE = Path(__file__).parent
SMALL_PLAN = HERE / "qwen3-omni-3node.yaml"
CATALOG_PLAN = catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml"


@pytest.fixture(scope="session")
def small_plan() -> ResolvedPlan:
    return load_plan(SMALL_PLAN)


@pytest.fixture(scope="session")
def catalog_plan() -> ResolvedPlan:
    return load_plan(CATALOG_PLAN)


@pytest.fixture(scope="session")
def workload() -> ResolvedWorkload:
    path = find_catalog_workload("qwen3-omni-servegen")
    assert path is not None
    return load_workload(path)


@pytest.fixture(scope="session")
def cost(small_plan: ResolvedPlan) -> CostModel:
    return CostModel(small_plan.model)
