"""The ingress's view of one request walking its type's path across plan nodes.

The same rules as the simulator (``omniplane.sim.simulator``): a component starts once every
predecessor on the path has released it, at the predecessor's first output along a streaming
edge and at its completion otherwise; an edge between two plan nodes delays the release by the
plan's transfer time; a streaming vocoder voices the rest of its audio once its feeding LLM has
finished. Node replicas apply these rules to edges inside a node (``omniplane.deploy.stage``);
this class applies them to edges *between* nodes and keeps what a retried session needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from omniplane.deploy.messages import DONE, FIRST, OpenOrder, Released, StageEvent
from omniplane.sim.request import TypePath
from omniplane.spec import FirstResponse, GeneratorKind, ModelSpec
from omniplane.spec.work import ResolvedWork


@dataclass(frozen=True, slots=True)
class Send:
    """Forward a release to the node serving ``rel.comp``."""

    node: str
    rel: Released


@dataclass(frozen=True, slots=True)
class Notify:
    """Tell the node serving streaming vocoder ``comp`` that its feeding LLM has finished."""

    node: str
    comp: str


class RequestWalk:
    def __init__(
        self,
        model: ModelSpec,
        path: TypePath,
        nodes: dict[str, str],
        transfer_s: float,
        rid: int,
        arrival: float,
        work: ResolvedWork,
    ) -> None:
        self.path = path
        self.nodes = nodes
        self.transfer_s = transfer_s
        self.rid, self.arrival, self.work = rid, arrival, work
        self.first: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.released: dict[str, dict[str, float]] = {c: {} for c in path.components}
        self.vocoders = {c for c in path.components if model.component(c).generator is GeneratorKind.VOCODER}
        llms = [c for c in path.components if model.component(c).is_llm]
        self.text_comp = llms[0] if llms else None  # produces the text stream (TTFT)

    # ---- static facts ------------------------------------------------------------------------
    def node_comps(self, node: str) -> tuple[str, ...]:
        return tuple(c for c in self.path.components if self.nodes[c] == node)

    def entry_nodes(self) -> list[str]:
        """Nodes with a component that needs nothing (opened at arrival), in path order."""
        out: list[str] = []
        for c in self.path.components:
            if not self.path.preds[c] and self.nodes[c] not in out:
                out.append(self.nodes[c])
        return out

    # ---- progress ----------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return len(self.done) == len(self.path.components)

    @property
    def first_response(self) -> float | None:
        """Model time of the type's first response (TTFT/TTFO at the sink's first output, E2E
        when the request finishes)."""
        if self.path.metric is FirstResponse.E2E:
            return max(self.done.values()) if self.finished else None
        return self.first.get(self.path.sink)

    def on_event(self, node: str, ev: StageEvent) -> list[Send | Notify]:
        """Record a milestone of ``ev.comp`` on ``node``; what must cross to other nodes."""
        comp, t = ev.comp, ev.t
        if ev.kind not in (FIRST, DONE) or comp not in self.nodes:
            return []
        seen = self.first if ev.kind == FIRST else self.done
        if comp in seen:
            return []  # a repeat from a retried session
        out: list[Send | Notify] = []
        if ev.kind == DONE and comp not in self.first:  # engines report first before done
            out = self.on_event(node, StageEvent(FIRST, comp, t))
        seen[comp] = t
        for succ, streaming in self.path.succs[comp]:
            remote = self.nodes[succ] != node
            if streaming == (ev.kind == FIRST):
                ready = t + (self.transfer_s if remote else 0.0)
                self.released[succ].setdefault(comp, ready)
                if remote:
                    out.append(Send(self.nodes[succ], Released(succ, comp, ready)))
            elif ev.kind == DONE and remote and succ in self.vocoders:
                out.append(Notify(self.nodes[succ], succ))
        return out

    def order_for(self, node: str, type_name: str, attempt: int = 0) -> OpenOrder:
        """What a (re-)opened session on ``node`` must run and already knows."""
        comps = tuple(c for c in self.node_comps(node) if c not in self.done)
        released = tuple(Released(c, p, t) for c in comps for p, t in self.released[c].items())
        upstream = tuple(
            v for v in comps if v in self.vocoders and any(p in self.done for p in self.path.preds[v])
        )
        return OpenOrder(
            self.rid, type_name, self.arrival, self.work, dict(self.nodes), comps, released, upstream, attempt
        )
