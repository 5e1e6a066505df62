"""A model spec: components, data edges, request types and executor types, validated as a graph."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from functools import cached_property
from typing import Annotated, Literal

from pydantic import Field, model_validator

from omniplane.policy import PathClass
from omniplane.spec.base import Document, Name
from omniplane.spec.component import Component, ComponentKind, GeneratorKind, Modality
from omniplane.spec.errors import Loc, SpecFieldError
from omniplane.spec.executor import ExecutorType
from omniplane.spec.request import RequestType, work_keys


class ModelSpec(Document):
    """``kind: model``. The unit every other layer reads."""

    kind: Literal["model"] = "model"
    name: Name
    display_name: str = ""
    description: str = ""
    source: str = ""
    components: Annotated[list[Component], Field(min_length=1)]
    request_types: Annotated[list[RequestType], Field(min_length=1)]
    executor_types: Annotated[list[ExecutorType], Field(min_length=1)]

    @model_validator(mode="after")
    def _graph(self) -> ModelSpec:
        issues: list[tuple[Loc, str]] = []
        issues += _check_components(self.components)
        if not issues:
            issues += _check_request_types(self)
            issues += _check_executor_types(self)
        if issues:
            raise SpecFieldError(issues)
        return self

    # ---- lookups -------------------------------------------------------------------------
    @cached_property
    def by_name(self) -> dict[str, Component]:
        return {c.name: c for c in self.components}

    def component(self, name: str) -> Component:
        try:
            return self.by_name[name]
        except KeyError:
            raise KeyError(f"model {self.name!r} has no component {name!r}") from None

    def request_type(self, name: str) -> RequestType:
        for rt in self.request_types:
            if rt.name == name:
                return rt
        known = ", ".join(r.name for r in self.request_types)
        raise KeyError(f"model {self.name!r} has no request type {name!r} (known: {known})")

    @property
    def type_names(self) -> list[str]:
        return [r.name for r in self.request_types]

    @cached_property
    def edges(self) -> list[tuple[str, str, bool]]:
        return [(c.name, e.to, e.colocatable) for c in self.components for e in c.edges]

    @cached_property
    def topo_order(self) -> list[str]:
        return _kahn(self.components)

    def colocatable(self, a: str, b: str) -> bool:
        return any(
            ok and {src, dst} == {a, b} for src, dst, ok in self.edges
        )

    def ordered(self, names: Iterable[str]) -> list[str]:
        """``names`` in topological order of the graph."""
        wanted = set(names)
        return [n for n in self.topo_order if n in wanted]

    def path_of(self, type_name: str) -> list[str]:
        return self.ordered(self.request_type(type_name).path)

    def feeders(self, path: Iterable[str], component: str) -> list[tuple[str, bool]]:
        """The start rule of a downstream component: the components of ``path`` (in its order)
        with an edge into ``component``, each with whether that edge streams. ``component``
        starts once every feeder has released it, a streaming feeder at its first output and
        any other at its completion (plus the transfer time between plan nodes): the
        simulator's walk (:mod:`omniplane.sim.walk`), the solo latency
        (:mod:`omniplane.perf.solo`) and the planner's estimate (:mod:`omniplane.plan.montecarlo`)
        start components by it."""
        out = []
        for p in path:
            edge = next((e for e in self.component(p).edges if e.to == component), None)
            if edge is not None:
                out.append((p, edge.streaming))
        return out

    def executor_type_for(self, hosts: Iterable[str]) -> ExecutorType | None:
        """The executor type that runs exactly ``hosts``.

        An explicit type wins. Otherwise a set joined by colocatable edges whose members each
        have a single-component type gets a derived merged type with the TP degrees and batch
        sizes of its primary member (the LLM if any, else the largest component); the other
        members run inside it. ``None`` if the set cannot be hosted.
        """
        host_set = frozenset(hosts)
        for et in self.executor_types:
            if et.host_set == host_set:
                return et
        if len(host_set) < 2 or not _colocated(host_set, self.edges):
            return None
        singles = [self.single_executor_type(n) for n in host_set]
        if any(s is None for s in singles):
            return None
        members = [self.component(n) for n in host_set]
        primary = max(members, key=lambda c: (c.kind is ComponentKind.LLM, c.size.params))
        base = self.single_executor_type(primary.name)
        assert base is not None
        return ExecutorType(
            name="+".join(self.ordered(host_set)),
            hosts=self.ordered(host_set),
            tp=base.tp,
            max_batch=base.max_batch,
        )

    def single_executor_type(self, component: str) -> ExecutorType | None:
        return next((e for e in self.executor_types if e.host_set == {component}), None)

    def cpu_seconds_per_item(self, component: str) -> float:
        """CPU preprocessing time per input item of an encoder (from its own executor type);
        it overlaps with GPU work when the executor is busy (Cornfigurator section 5.2)."""
        et = self.single_executor_type(component)
        return et.cpu_seconds_per_item if et is not None else 0.0

    def shared_stage(self) -> str | None:
        """The first autoregressive component every request type passes through, if any
        (HorizonServe's shared stage, e.g. the thinker)."""
        common = set.intersection(*(set(r.path) for r in self.request_types))
        for name in self.topo_order:
            if name in common and self.component(name).is_llm:
                return name
        return None

    def long_types(self) -> list[str]:
        return [r.name for r in self.request_types if r.path_class is PathClass.LONG]


def _kahn(components: list[Component]) -> list[str]:
    """Kahn's algorithm over known targets; the result is shorter than ``components`` exactly
    when the graph has a cycle (the missing names sit on or behind it)."""
    names = {c.name for c in components}
    indeg = dict.fromkeys(names, 0)
    succ = {c.name: [e.to for e in c.edges if e.to in names] for c in components}
    for targets in succ.values():
        for m in targets:
            indeg[m] += 1
    ready = [c.name for c in components if indeg[c.name] == 0]
    out: list[str] = []
    while ready:
        n = ready.pop(0)
        out.append(n)
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    return out


def _colocated(names: frozenset[str], edges: list[tuple[str, str, bool]]) -> bool:
    """True when ``names`` is connected using only colocatable edges inside the set."""
    if not names:
        return False
    adj: dict[str, set[str]] = {n: set() for n in names}
    for a, b, ok in edges:
        if ok and a in names and b in names:
            adj[a].add(b)
            adj[b].add(a)
    start = next(iter(names))
    seen, stack = {start}, [start]
    while stack:
        for m in adj[stack.pop()] - seen:
            seen.add(m)
            stack.append(m)
    return seen == set(names)


def _check_components(components: list[Component]) -> list[tuple[Loc, str]]:
    issues: list[tuple[Loc, str]] = []
    first: dict[str, int] = {}
    for i, c in enumerate(components):
        if c.name in first:
            issues.append(
                (("components", i, "name"),
                 f"duplicate component name {c.name!r} (also components[{first[c.name]}])")
            )
        first.setdefault(c.name, i)
    names = set(first)
    for i, c in enumerate(components):
        targets: set[str] = set()
        for j, e in enumerate(c.edges):
            loc: Loc = ("components", i, "edges", j, "to")
            if e.to not in names:
                issues.append(
                    (loc, f"dangling edge: unknown component {e.to!r} "
                          f"(expected one of: {', '.join(sorted(names))})")
                )
            elif e.to == c.name:
                issues.append((loc, f"cyclic edge: {c.name!r} points to itself"))
            elif e.to in targets:
                issues.append((loc, f"duplicate edge {c.name!r} -> {e.to!r}"))
            targets.add(e.to)
            if e.kv and e.to in names:
                to = next(x for x in components if x.name == e.to)
                kv_loc: Loc = ("components", i, "edges", j, "kv")
                if c.kind is not ComponentKind.LLM or to.kind is not ComponentKind.LLM:
                    issues.append((kv_loc, f"a kv edge joins two LLM phases, but {c.name!r} is {c.kind} "
                                           f"and {e.to!r} is {to.kind}"))
                elif e.streaming or e.colocatable:
                    issues.append((kv_loc, "a kv edge hands over a finished prefill: it is neither "
                                           "streaming nor colocatable"))
    if not issues:
        ordered = set(_kahn(components))
        if len(ordered) < len(components):
            stuck = sorted(c.name for c in components if c.name not in ordered)
            issues.append((("components",), f"cyclic edges: a cycle runs through {stuck}"))
    return issues


_OUTPUT_PRODUCERS = {
    Modality.TEXT: lambda c: c.kind is ComponentKind.LLM,
    Modality.AUDIO: lambda c: c.generator is GeneratorKind.VOCODER,
    Modality.IMAGE: lambda c: c.generator in (GeneratorKind.VAE, GeneratorKind.DIT),
    Modality.VIDEO: lambda c: c.generator in (GeneratorKind.VAE, GeneratorKind.DIT),
}


def _check_request_types(model: ModelSpec) -> list[tuple[Loc, str]]:
    issues: list[tuple[Loc, str]] = []
    comps = {c.name: c for c in model.components}
    seen: dict[str, int] = {}
    for i, rt in enumerate(model.request_types):
        base: Loc = ("request_types", i)
        if rt.name in seen:
            issues.append(
                ((*base, "name"),
                 f"duplicate request type {rt.name!r} (also request_types[{seen[rt.name]}])")
            )
        seen.setdefault(rt.name, i)
        unknown = _unknown_components(base, "path", rt.path, comps)
        if unknown:
            issues += unknown
            continue
        issues += _check_path(model, rt, base)
        issues += _check_work(rt, comps, base)
    return issues


def _check_path(model: ModelSpec, rt: RequestType, base: Loc) -> list[tuple[Loc, str]]:
    issues: list[tuple[Loc, str]] = []
    comps = model.by_name
    on_path = set(rt.path)
    inner = [(a, b) for a, b, _ in model.edges if a in on_path and b in on_path]
    sinks = sorted(n for n in on_path if not any(a == n for a, _ in inner))
    if not _colocated_any(frozenset(on_path), inner):
        issues.append(((*base, "path"), f"path {rt.path} is not connected by the model's edges"))
        return issues
    if len(sinks) != 1:
        issues.append(((*base, "path"), f"path must end at one component, but ends at {sinks}"))
        return issues
    sink = comps[sinks[0]]
    if not _OUTPUT_PRODUCERS[rt.output](sink):
        issues.append(
            ((*base, "path"),
             f"path does not reach its output: it ends at {sink.name!r} ({sink.kind}"
             f"{'/' + sink.generator if sink.generator else ''}), which cannot produce "
             f"{rt.output.value} output")
        )
    for j, n in enumerate(rt.path):
        c = comps[n]
        if c.kind is ComponentKind.ENCODER and not set(c.modalities) & set(rt.inputs):
            issues.append(
                ((*base, "path", j),
                 f"encoder {n!r} encodes {[m.value for m in c.modalities]} but inputs are "
                 f"{[m.value for m in rt.inputs]}")
            )
    for m in rt.inputs:
        if m is Modality.TEXT:
            continue
        if not any(comps[n].encodes(m) for n in rt.path):
            has = [c.name for c in model.components if c.encodes(m)]
            if has:
                issues.append(
                    ((*base, "inputs"),
                     f"input {m.value} needs one of the encoders {has} on the path")
                )
    return issues


def _colocated_any(names: frozenset[str], edges: list[tuple[str, str]]) -> bool:
    return _colocated(names, [(a, b, True) for a, b in edges])


def _check_work(rt: RequestType, comps: dict[str, Component], base: Loc) -> list[tuple[Loc, str]]:
    issues: list[tuple[Loc, str]] = []
    for name in rt.work:
        if name not in rt.path:
            issues.append(
                ((*base, "work", name),
                 f"work given for {name!r}, which is not on the path {rt.path}")
            )
    for name in rt.path:
        c = comps[name]
        required, optional = work_keys(c.kind, c.generator)
        given = rt.work.get(name, {})
        missing = sorted(required - set(given))
        if missing:
            issues.append(((*base, "work", name), f"missing work quantity {missing} for {name!r}"))
        extra = sorted(set(given) - required - optional)
        if extra:
            issues.append(
                ((*base, "work", name),
                 f"unknown work quantity {extra} for a {c.kind}; "
                 f"expected {sorted(required | optional)}")
            )
        if c.generator is GeneratorKind.VOCODER and "audio_seconds" not in given:
            feeders = [p for p in rt.path if comps[p].is_llm and "output_tokens" in rt.work.get(p, {})]
            if not feeders or c.size.frame_rate_hz is None:
                issues.append(
                    ((*base, "work", name),
                     "a vocoder needs audio_seconds, or size.frame_rate_hz and an llm with "
                     "output_tokens before it on the path")
                )
        if c.is_llm and "prompt_tokens" not in given and not _upstream_llm(name, rt, comps):
            issues.append(((*base, "work", name),
                           f"missing work quantity ['prompt_tokens'] for {name!r} "
                           "(only an llm fed by another llm may leave it out)"))
        if (c.is_llm and rt.output is Modality.TEXT and "output_tokens" not in given
                and _is_sink(name, rt, comps)):
            issues.append(((*base, "work", name),
                           "text output needs output_tokens on the llm that produces it"))
        if c.kind is ComponentKind.ENCODER and given and not (
            "tokens_per_item" in given
            or ("seconds" in given and c.size.tokens_per_second is not None)
        ):
            issues.append(
                ((*base, "work", name),
                 "an encoder needs tokens_per_item, or seconds with size.tokens_per_second")
            )
    return issues


def _upstream_llm(name: str, rt: RequestType, comps: dict[str, Component]) -> bool:
    """True when an llm on the path feeds ``name`` (directly or through other path components)."""
    preds = {n: [m for m in rt.path if any(e.to == n for e in comps[m].edges)] for n in rt.path}
    stack, seen = list(preds[name]), set()
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        if comps[m].is_llm:
            return True
        stack.extend(preds[m])
    return False


def _is_sink(name: str, rt: RequestType, comps: dict[str, Component]) -> bool:
    return not any(e.to in rt.path for e in comps[name].edges)


def _unknown_components(
    base: Loc, field: str, names: Sequence[str], comps: Collection[str]
) -> list[tuple[Loc, str]]:
    """One issue per entry of ``names`` (the list at ``base.field``) that is not a component."""
    return [
        ((*base, field, j), f"unknown component {n!r} (expected one of: {', '.join(sorted(comps))})")
        for j, n in enumerate(names)
        if n not in comps
    ]


def _check_executor_types(model: ModelSpec) -> list[tuple[Loc, str]]:
    issues: list[tuple[Loc, str]] = []
    comps = set(model.by_name)
    seen_name: dict[str, int] = {}
    seen_hosts: dict[frozenset[str], int] = {}
    for i, et in enumerate(model.executor_types):
        base: Loc = ("executor_types", i)
        if et.name in seen_name:
            issues.append(((*base, "name"), f"duplicate executor type name {et.name!r}"))
        seen_name.setdefault(et.name, i)
        bad = _unknown_components(base, "hosts", et.hosts, comps)
        if bad:
            issues += bad
            continue
        if et.host_set in seen_hosts:
            issues.append(
                ((*base, "hosts"),
                 f"executor_types[{seen_hosts[et.host_set]}] already hosts exactly these components")
            )
        seen_hosts.setdefault(et.host_set, i)
        if len(et.hosts) > 1 and not _colocated(et.host_set, model.edges):
            issues.append(
                ((*base, "hosts"),
                 f"components {sorted(et.hosts)} are not joined by colocatable edges, "
                 "so one executor cannot host them")
            )
    hosted_alone = {h for et in model.executor_types if len(et.hosts) == 1 for h in et.hosts}
    for name in sorted(comps - hosted_alone):
        if not any(name in et.hosts for et in model.executor_types):
            issues.append(
                (("executor_types",), f"no executor type hosts component {name!r}")
            )
    return issues
