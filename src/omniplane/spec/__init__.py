"""The spec language: models, GPUs, request types, executor types, workloads, SLOs and plans.

Everything is a frozen pydantic model validated at construction; files are loaded with
:func:`load_document` and friends, which report every issue with file, line, column and field.
This package never imports torch, CUDA, vLLM or Ray.
"""

from omniplane.policy import PathClass
from omniplane.spec.catalog import (
    catalog_gpus_path,
    catalog_model_paths,
    catalog_workload_paths,
    find_catalog_model,
    find_catalog_workload,
)
from omniplane.spec.component import Component, ComponentKind, Edge, GeneratorKind, Modality, Size
from omniplane.spec.dist import Distribution
from omniplane.spec.errors import SpecError, SpecFieldError, SpecIssue
from omniplane.spec.executor import ExecutorType
from omniplane.spec.gpu import GPUCatalog, GPUKind, compute_capability
from omniplane.spec.load import (
    PlanLoad,
    ResolvedPlan,
    ResolvedWorkload,
    dump,
    load_document,
    load_gpus,
    load_model,
    load_plan,
    load_workload,
    parse,
    plan_load,
    plan_workload,
    resolve_plan,
    resolve_workload,
    validate_file,
    workload_ref,
)
from omniplane.spec.model import ModelSpec
from omniplane.spec.plan import ExecutorGroup, PlanNode, PlanSpec, PredictedGoodput, Prediction, Route
from omniplane.spec.request import FirstResponse, RequestType
from omniplane.spec.slo import (
    ExplicitSLO,
    IsolatedPercentileSLO,
    LatencyTargets,
    SLOChoice,
    SLOPolicy,
    SoloMultiplierSLO,
    parse_slo,
)
from omniplane.spec.workload import TraceArrivals, TraceMapping, WorkloadSpec

__all__ = [
    "Component",
    "ComponentKind",
    "Distribution",
    "Edge",
    "ExecutorGroup",
    "ExecutorType",
    "ExplicitSLO",
    "FirstResponse",
    "GPUCatalog",
    "GPUKind",
    "GeneratorKind",
    "IsolatedPercentileSLO",
    "LatencyTargets",
    "Modality",
    "ModelSpec",
    "PathClass",
    "PlanLoad",
    "PlanNode",
    "PlanSpec",
    "PredictedGoodput",
    "Prediction",
    "RequestType",
    "ResolvedPlan",
    "ResolvedWorkload",
    "Route",
    "SLOChoice",
    "SLOPolicy",
    "Size",
    "SoloMultiplierSLO",
    "SpecError",
    "SpecFieldError",
    "SpecIssue",
    "TraceArrivals",
    "TraceMapping",
    "WorkloadSpec",
    "catalog_gpus_path",
    "catalog_model_paths",
    "catalog_workload_paths",
    "compute_capability",
    "dump",
    "find_catalog_model",
    "find_catalog_workload",
    "load_document",
    "load_gpus",
    "load_model",
    "load_plan",
    "load_workload",
    "parse",
    "parse_slo",
    "plan_load",
    "plan_workload",
    "resolve_plan",
    "resolve_workload",
    "validate_file",
    "workload_ref",
]
