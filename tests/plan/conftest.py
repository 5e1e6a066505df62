"""Small planning problems shared by the planner tests (built once per session)."""

from __future__ import annotations

from functools import cache

from omniplane.perf import CostModel
from omniplane.plan.costs import CostTable
from omniplane.plan.problem import Problem, make_problem
from omniplane.spec import find_catalog_workload, load_gpus, load_workload


@cache
def problem(workload: str, gpus: int, samples: int = 32) -> Problem:
    path = find_catalog_workload(workload)
    assert path is not None, workload
    return make_problem(load_workload(path), load_gpus().get("A100-80GB"), gpus, samples=samples)


@cache
def table(workload: str, samples: int = 32) -> CostTable:
    pb = problem(workload, 4, samples)
    return CostTable(pb, CostModel(pb.model))
