"""One request in a simulation: its walk along the path plus where it runs and the timestamps
the metrics read. The walk's rules are in :mod:`omniplane.sim.walk`."""

from __future__ import annotations

from typing import Any

from omniplane.sim.walk import NO_JOINS, TypePath, Walk
from omniplane.spec.work import ResolvedWork

__all__ = ["SimRequest", "TypePath"]


class SimRequest(Walk):
    """Mutable state of one request in a simulation (plain slots: there are many of them)."""

    __slots__ = ("arrival", "cpu_free", "finish", "jobs", "left", "nodes", "rid", "seats", "started",
                 "type", "work")

    def __init__(self, rid: int, type_name: str, arrival: float, work: ResolvedWork, path: TypePath,
                 nodes: dict[str, str]) -> None:
        # Walk.__init__, inline (one per request: the call is a measurable share of a queue check)
        self.path = path
        self.waiting = path.joins.copy() if path.joins else NO_JOINS
        self.first_out: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.failed: str | None = None
        self._fed: set[str] | None = None
        self.rid = rid
        self.type = type_name
        self.arrival = arrival
        self.work = work
        self.nodes = nodes  # component -> plan node serving it for this request
        self.started: dict[str, float] = {}  # component -> dispatch time
        # component fed along a streaming edge -> its Job, until done (None: there is none)
        self.jobs: dict[str, Any] | None = None
        self.seats: dict[str, Any] | None = None  # node -> its executor group, or pinned executor
        self.left: dict[str, int] | None = None  # pinned node -> components still to finish there
        self.cpu_free: dict[Any, float] | None = None  # executor -> end of this request's preprocessing
        self.finish: float | None = None

    def latency(self) -> float | None:
        """First-response latency by the type's metric (None until it happened)."""
        fr = self.first_response
        return None if fr is None else fr - self.arrival

    def tpot(self, component: str) -> float | None:
        """Time per output token of an LLM component after its first token (None if n/a)."""
        out = self.work.get(component, {}).get("output_tokens", 0.0)
        first, last = self.first_out.get(component), self.done.get(component)
        if first is None or last is None or out <= 1:
            return None
        return (last - first) / (out - 1)
