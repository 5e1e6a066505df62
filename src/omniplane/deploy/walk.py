"""The ingress's view of one request walking its type's path across plan nodes.

The rules are the simulator's request walk (:class:`omniplane.sim.walk.Walk`): node replicas
apply them to edges inside a node (``omniplane.deploy.stage``); this class applies them to
edges *between* nodes, adding the plan's transfer time to each release that crosses, telling a
remote streaming vocoder when its feeding LLM has finished, and keeping what a retried session
needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from omniplane.deploy.messages import DONE, FIRST, OpenOrder, Released, StageEvent
from omniplane.sim.walk import TypePath, Walk
from omniplane.spec import ModelSpec
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


class RequestWalk(Walk):
    __slots__ = ("arrival", "nodes", "released", "rid", "text_comp", "transfer_s", "work")

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
        super().__init__(path)
        self.nodes = nodes
        self.transfer_s = transfer_s
        self.rid, self.arrival, self.work = rid, arrival, work
        self.released: dict[str, dict[str, float]] = {c: {} for c in path.components}
        llms = [c for c in path.components if model.component(c).is_llm]
        self.text_comp = llms[0] if llms else None  # produces the text stream (TTFT)

    # ---- static facts ------------------------------------------------------------------------
    def node_comps(self, node: str) -> tuple[str, ...]:
        return tuple(c for c in self.path.components if self.nodes[c] == node)

    def entry_nodes(self) -> list[str]:
        """Nodes with a component that needs nothing (opened at arrival), in path order."""
        out: list[str] = []
        for c in self.path.entry:
            if self.nodes[c] not in out:
                out.append(self.nodes[c])
        return out

    # ---- progress ----------------------------------------------------------------------------
    def on_event(self, node: str, ev: StageEvent) -> list[Send | Notify]:
        """Record a milestone of ``ev.comp`` on ``node``; what must cross to other nodes."""
        comp, t = ev.comp, ev.t
        if comp not in self.nodes:
            return []
        released: tuple[str, ...]
        feeds: tuple[str, ...] = ()
        if ev.kind == FIRST:
            released = self.first_output(comp, t)
        elif ev.kind == DONE:
            released, feeds = self.complete(comp, t)
        else:
            return []
        out: list[Send | Notify] = []
        for succ in released:
            remote = self.nodes[succ] != node
            ready = t + (self.transfer_s if remote else 0.0)
            self.released[succ].setdefault(comp, ready)
            if remote:
                out.append(Send(self.nodes[succ], Released(succ, comp, ready)))
        out.extend(Notify(self.nodes[succ], succ) for succ in feeds if self.nodes[succ] != node)
        return out

    def order_for(self, node: str, type_name: str, attempt: int = 0) -> OpenOrder:
        """What a (re-)opened session on ``node`` must run and already knows."""
        comps = tuple(c for c in self.node_comps(node) if c not in self.done)
        released = tuple(Released(c, p, t) for c in comps for p, t in self.released[c].items())
        feed_of, ends = self.path.feed_of, self.path.ends_feed
        upstream = tuple(v for v in comps if (f := feed_of.get(v)) in self.done and v in ends[f])
        return OpenOrder(
            self.rid, type_name, self.arrival, self.work, dict(self.nodes), comps, released, upstream, attempt
        )
