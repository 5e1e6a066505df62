"""A request's journey through its type's path: which components it still needs, which of
them are ready, and the timestamps the metrics read.

A path is a small DAG (several encoders feed a thinker, which feeds a talker...). A component
starts once every predecessor on the path has *released* it: at the predecessor's first
output along a streaming edge, at its completion otherwise. A disaggregated edge (the two
components on different plan nodes) delays the release by the plan's transfer time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omniplane.spec import FirstResponse, ModelSpec
from omniplane.spec.work import ResolvedWork


@dataclass(frozen=True, slots=True)
class TypePath:
    """Static facts of one request type's path, computed once per simulation."""

    name: str
    components: tuple[str, ...]  # topological order
    preds: dict[str, tuple[str, ...]]
    succs: dict[str, tuple[tuple[str, bool], ...]]  # successor, streaming edge?
    sink: str
    metric: FirstResponse
    n_preds: dict[str, int] = field(default_factory=dict)
    llm_stream_feeder: dict[str, str] = field(default_factory=dict)  # llm -> llm feeding it (streaming)

    @staticmethod
    def of(model: ModelSpec, type_name: str) -> TypePath:
        rt = model.request_type(type_name)
        comps = tuple(model.ordered(rt.path))
        on = set(comps)
        preds: dict[str, list[str]] = {c: [] for c in comps}
        succs: dict[str, list[tuple[str, bool]]] = {c: [] for c in comps}
        for c in comps:
            for e in model.component(c).edges:
                if e.to in on:
                    preds[e.to].append(c)
                    succs[c].append((e.to, e.streaming))
        sinks = [c for c in comps if not succs[c]]
        return TypePath(
            name=type_name,
            components=comps,
            preds={c: tuple(p) for c, p in preds.items()},
            succs={c: tuple(s) for c, s in succs.items()},
            sink=sinks[0],
            metric=rt.first_response,
            n_preds={c: len(p) for c, p in preds.items()},
            llm_stream_feeder={
                c: p for c in comps for p in preds[c]
                if model.component(c).is_llm and model.component(p).is_llm
                and dict(succs[p]).get(c, False)
            },
        )


class SimRequest:
    """Mutable state of one request in a simulation (plain slots: there are many of them)."""

    __slots__ = ("arrival", "cpu_free", "done", "executors", "failed", "finish", "first_out",
                 "first_response", "groups", "jobs", "node_left", "nodes", "path", "rid", "started",
                 "type", "waiting_on", "work")

    def __init__(self, rid: int, type_name: str, arrival: float, work: ResolvedWork, path: TypePath,
                 nodes: dict[str, str]) -> None:
        self.rid = rid
        self.type = type_name
        self.arrival = arrival
        self.work = work
        self.path = path
        self.nodes = nodes  # component -> plan node serving it for this request
        self.waiting_on = dict(path.n_preds)  # component -> unreleased predecessors
        self.started: dict[str, float] = {}  # component -> dispatch time
        self.done: dict[str, float] = {}  # component -> completion time
        self.first_out: dict[str, float] = {}  # component -> first output time
        self.jobs: dict[str, Any] = {}  # component -> its Job
        self.groups: dict[str, int] = {}  # node -> chosen executor group
        self.executors: dict[str, int] = {}  # node -> pinned executor index (merged nodes)
        self.node_left: dict[str, int] = {}  # pinned node -> components still to finish there
        self.cpu_free: dict[Any, float] = {}  # executor -> end of this request's preprocessing
        self.first_response: float | None = None
        self.finish: float | None = None
        self.failed: str | None = None  # why the request was refused (it finished without output)

    @property
    def complete(self) -> bool:
        return self.finish is not None

    def latency(self) -> float | None:
        """First-response latency by the type's metric (None until it happened)."""
        return None if self.first_response is None else self.first_response - self.arrival

    def tpot(self, component: str) -> float | None:
        """Time per output token of an LLM component after its first token (None if n/a)."""
        out = self.work.get(component, {}).get("output_tokens", 0.0)
        first, last = self.first_out.get(component), self.done.get(component)
        if first is None or last is None or out <= 1:
            return None
        return (last - first) / (out - 1)
