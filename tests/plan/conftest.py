"""Small planning problems shared by the planner tests (built once per session)."""

from __future__ import annotations

from functools import cache

from omniplane.perf import CostModel
from omniplane.plan.costs import CostTable
from omniplane.plan.problem import Problem, make_problem
from omniplane.slo.resolve import resolve_targets
from omniplane.spec import (
    LatencyTargets,
    ModelSpec,
    ResolvedWorkload,
    WorkloadSpec,
    find_catalog_workload,
    load_gpus,
    load_workload,
    parse,
)
from tests.spec.builders import tiny_model, tiny_workload


def _workload(name: str) -> ResolvedWorkload:
    if name == "tiny":  # encoder -> thinker -> talker -> vocoder, two types (tests/spec/builders.py)
        spec = parse(WorkloadSpec, tiny_workload() | {"slo": {"policy": "isolated_percentile"}})
        return ResolvedWorkload(spec, parse(ModelSpec, tiny_model()), None)
    path = find_catalog_workload(name)
    assert path is not None, name
    return load_workload(path)


@cache
def problem(workload: str, gpus: int, samples: int = 32) -> Problem:
    return make_problem(_workload(workload), load_gpus().get("A100-80GB"), gpus, samples=samples)


@cache
def table(workload: str, samples: int = 32) -> CostTable:
    pb = problem(workload, 4, samples)
    return CostTable(pb, CostModel(pb.model))


@cache
def targets(workload: str) -> LatencyTargets:
    tab = table(workload)
    return resolve_targets(tab.problem.workload.spec.slo, tab, tab.cost)
