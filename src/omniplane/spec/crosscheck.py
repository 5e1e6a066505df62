"""Checks that span two documents: a workload or plan against the model it names."""

from __future__ import annotations

from pathlib import Path

from omniplane.spec.catalog import find_trace
from omniplane.spec.errors import SpecIssue
from omniplane.spec.gpu import GPUCatalog
from omniplane.spec.model import ModelSpec
from omniplane.spec.plan import PlanSpec
from omniplane.spec.request import work_keys
from omniplane.spec.workload import TraceArrivals, WorkloadSpec


def check_workload(spec: WorkloadSpec, model: ModelSpec) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    known = model.type_names
    for t in spec.mix or {}:
        if t not in known:
            issues.append(SpecIssue(("mix", t), f"unknown request type {t!r} of model "
                                    f"{model.name!r} (expected one of: {', '.join(known)})"))
    for t, work in spec.sizes.items():
        if t not in known:
            issues.append(SpecIssue(("sizes", t), f"unknown request type {t!r} (expected one of: "
                                    f"{', '.join(known)})"))
            continue
        rt = model.request_type(t)
        for comp, quantities in work.items():
            if comp not in rt.path:
                issues.append(SpecIssue(("sizes", t, comp),
                                        f"{comp!r} is not on the path of {t!r} ({rt.path})"))
                continue
            c = model.component(comp)
            required, optional = work_keys(c.kind, c.generator)
            for q in quantities:
                if q not in required | optional:
                    issues.append(SpecIssue(("sizes", t, comp, q),
                                            f"unknown work quantity {q!r} for {comp!r}; "
                                            f"expected {sorted(required | optional)}"))
    slo = spec.slo
    if slo.policy == "explicit":
        for t in slo.targets_ms:
            if t not in known:
                issues.append(SpecIssue(("slo", "targets_ms", t),
                                        f"unknown request type {t!r} (expected one of: "
                                        f"{', '.join(known)})"))
        active = [t for t, f in (spec.mix or {}).items() if f > 0]
        for t in active:
            if t not in slo.targets_ms:
                issues.append(SpecIssue(("slo", "targets_ms"),
                                        f"no target for request type {t!r}, which is in the mix"))
    if isinstance(spec.arrival, TraceArrivals):
        issues += _check_trace(spec, spec.arrival, model)
    return issues


def _check_trace(spec: WorkloadSpec, arrival: TraceArrivals, model: ModelSpec) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    mapping = arrival.mapping
    if mapping is None:
        return issues
    for key in mapping.sizes:
        loc = ("arrival", "mapping", "sizes", key)
        comp, _, q = key.partition(".")
        if comp not in model.by_name:
            issues.append(SpecIssue(loc, f"unknown component {comp!r}"))
            continue
        c = model.component(comp)
        required, optional = work_keys(c.kind, c.generator)
        if q not in required | optional:
            issues.append(SpecIssue(loc, f"unknown work quantity {q!r} for {comp!r}; "
                                         f"expected {sorted(required | optional)}"))
    outputs = {rt.output for rt in model.request_types}
    for m, f in (mapping.output_fractions or {}).items():
        if f > 0 and m not in outputs:
            issues.append(SpecIssue(("arrival", "mapping", "output_fractions", m.value),
                                    f"no request type of {model.name!r} outputs {m.value}"))
    if spec.mix is not None and (mapping.type_column or mapping.output_fractions):
        issues.append(SpecIssue(("mix",), "mix and a mapping that assigns types (type_column or "
                                          "output_fractions) are both given; keep one"))
    return issues


def check_trace_file(arrival: TraceArrivals, base_dir: Path | None) -> list[SpecIssue]:
    """The trace exists (shipped name or file) and a shipped trace's format matches."""
    try:
        _, fmt = find_trace(arrival.trace, base_dir)
    except FileNotFoundError as exc:
        return [SpecIssue(("arrival", "trace"), str(exc))]
    if fmt is not None and fmt != arrival.format:
        return [SpecIssue(("arrival", "format"),
                          f"shipped trace {arrival.trace!r} has format {fmt!r} (got {arrival.format!r})")]
    return []


def check_plan(spec: PlanSpec, model: ModelSpec, gpus: GPUCatalog) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    try:
        gpus.get(spec.gpu)
    except KeyError as exc:
        issues.append(SpecIssue(("gpu",), str(exc.args[0])))
    comps = model.by_name
    for i, node in enumerate(spec.nodes):
        unknown = [c for c in node.components if c not in comps]
        for c in unknown:
            issues.append(SpecIssue(("nodes", i, "components"), f"unknown component {c!r}"))
        if unknown:
            continue
        et = model.executor_type_for(node.components)
        if et is None:
            issues.append(SpecIssue(("nodes", i, "components"),
                                    f"no executor type can host {sorted(node.components)}"))
            continue
        for j, g in enumerate(node.executors):
            if g.gpu is not None:
                try:
                    gpus.get(g.gpu)
                except KeyError:
                    issues.append(SpecIssue(("nodes", i, "executors", j, "gpu"),
                                            f"unknown GPU kind {g.gpu!r} (expected a catalog kind or alias: "
                                            f"{', '.join(gpus.names())}; default: the plan's gpu)"))
            if g.tp not in et.tp:
                issues.append(SpecIssue(("nodes", i, "executors", j, "tp"),
                                        f"tp {g.tp} not allowed for {et.name} (allowed: {et.tp})"))
            # the grid is what the planner searches; a runtime's memory fit may plan a smaller
            # max batch (the most sequences its KV holds, omniplane.plan.runtime), never a larger one
            if not 1 <= g.max_batch <= max(et.max_batch):
                issues.append(SpecIssue(("nodes", i, "executors", j, "max_batch"),
                                        f"max_batch {g.max_batch} not allowed for {et.name} "
                                        f"(allowed: 1 to {max(et.max_batch)}; the planner's grid "
                                        f"{et.max_batch})"))
        for t in node.routing:
            if t not in model.type_names:
                issues.append(SpecIssue(("nodes", i, "routing", t), f"unknown request type {t!r}"))
    nodes = {n.name: n for n in spec.nodes}
    for t in model.type_names:
        if t not in spec.routes:
            issues.append(SpecIssue(("routes",), f"request type {t!r} has no route"))
    for t, routes in spec.routes.items():
        if t not in model.type_names:
            issues.append(SpecIssue(("routes", t), f"unknown request type {t!r}"))
            continue
        path = set(model.request_type(t).path)
        for j, r in enumerate(routes):
            counts: dict[str, int] = dict.fromkeys(path, 0)
            for n in r.nodes:
                for c in nodes[n].components if n in nodes else []:
                    if c in counts:
                        counts[c] += 1
            missing = sorted(c for c, k in counts.items() if k == 0)
            twice = sorted(c for c, k in counts.items() if k > 1)
            if missing:
                issues.append(SpecIssue(("routes", t, j, "nodes"),
                                        f"route does not serve component(s) {missing} of {t!r}"))
            if twice:
                issues.append(SpecIssue(("routes", t, j, "nodes"),
                                        f"route serves component(s) {twice} more than once"))
            useless = [n for n in r.nodes if n in nodes and not set(nodes[n].components) & path]
            if useless:
                issues.append(SpecIssue(("routes", t, j, "nodes"),
                                        f"node(s) {useless} serve nothing on the path of {t!r}"))
    return issues + _check_plan_basis(spec, model)


def _check_plan_basis(spec: PlanSpec, model: ModelSpec) -> list[SpecIssue]:
    """``slo`` and ``prediction`` name only the model's request types (a type without a target,
    e.g. one outside an explicit workload's mix, has no goodput)."""
    issues: list[SpecIssue] = []
    known = ", ".join(model.type_names)
    if spec.slo is not None:
        for t in spec.slo.targets_ms:
            if t not in model.type_names:
                issues.append(SpecIssue(("slo", "targets_ms", t),
                                        f"unknown request type {t!r} (expected one of: {known})"))
    pred = spec.prediction
    if pred is not None:
        for key, names in (("mix", pred.mix or {}), ("goodput_rps", pred.goodput_rps.per_type)):
            for t in names:
                if t not in model.type_names:
                    loc = ("prediction", key, t) if key == "mix" else ("prediction", key, "per_type", t)
                    issues.append(SpecIssue(loc, f"unknown request type {t!r} (expected one of: {known})"))
    return issues
