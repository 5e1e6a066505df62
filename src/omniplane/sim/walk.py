"""The request walk: how one request moves along its type's path, as a small pure state machine.

A path is a small DAG (encoders feed a thinker, which feeds a talker, which feeds a vocoder).
The rules, in one place for the simulator (:mod:`omniplane.sim.simulator`), the emulated
deployment's node replicas (:mod:`omniplane.deploy.stage`) and the ingress that forwards
releases between nodes (:mod:`omniplane.deploy.walk`):

* A component is **ready** once every predecessor on the path has *released* it.
* A predecessor releases its successor at its **first output** along a ``streaming`` edge and
  at its **completion** otherwise. A completion reported without a first output counts as both.
* When a component completes, the successors it streams into that consume the stream
  incrementally (vocoders) hear that their **feed ended**: the rest of their input exists.
* The **first response** is the sink's first output (TTFT / TTFO), or the completion of the
  whole path where the type's metric is end-to-end latency.
* A **failed** request (a component refused it) releases nothing more.

What the walk does not decide is *where* and *when* a release lands: hosts add the plan's
transfer time on edges between plan nodes, and queue ready components on their executors.
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from omniplane.spec import FirstResponse, GeneratorKind, ModelSpec

NOTHING: tuple[str, ...] = ()
_NO_COMPLETION: tuple[tuple[str, ...], tuple[str, ...]] = (NOTHING, NOTHING)
NO_JOINS: dict[str, int] = {}  # shared, never written (release() writes join counts only)


@dataclass(frozen=True, slots=True)
class TypePath:
    """Static facts of one request type's path (computed once per run)."""

    name: str
    components: tuple[str, ...]  # topological order
    preds: dict[str, tuple[str, ...]]
    succs: dict[str, tuple[tuple[str, bool], ...]]  # successor, streaming edge?
    sink: str
    metric: FirstResponse
    n_preds: dict[str, int]
    entry: tuple[str, ...]  # components with no predecessor: ready at arrival
    on_first: dict[str, tuple[str, ...]]  # successors released by a first output (streaming)
    on_done: dict[str, tuple[str, ...]]  # successors released by a completion (the other edges)
    ends_feed: dict[str, tuple[str, ...]]  # streaming successors told that the feed ended
    feed_of: dict[str, str]  # component -> the predecessor streaming into it
    size: int  # number of components
    joins: dict[str, int]  # components with several predecessors: how many
    # what a completion returns (precomputed: one is reported per job): after the first output,
    # and when it also stands for the first output
    completes: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    completes_first: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    kv_from: dict[str, str]  # decode phase -> the prefill phase handing it its KV cache
    first_at: str  # the component whose first output is the first response (a decode phase's prefill)

    @staticmethod
    def of(model: ModelSpec, type_name: str) -> TypePath:
        rt = model.request_type(type_name)
        comps = tuple(model.ordered(rt.path))
        on = set(comps)
        # the start rule (ModelSpec.feeders): a component is ready once every feeder released it
        preds = {c: [p for p, _ in model.feeders(comps, c)] for c in comps}
        succs: dict[str, list[tuple[str, bool]]] = {c: [] for c in comps}
        for c in comps:
            for e in model.component(c).edges:
                if e.to in on:
                    succs[c].append((e.to, e.streaming))
        incremental = {c for c in comps if model.component(c).generator is GeneratorKind.VOCODER}
        feed_of: dict[str, str] = {}
        for c in comps:
            for s, streaming in succs[c]:
                if streaming:
                    feed_of.setdefault(s, c)
        on_first = {c: tuple(s for s, st in succs[c] if st) for c in comps}
        on_done = {c: tuple(s for s, st in succs[c] if not st) for c in comps}
        ends_feed = {c: tuple(s for s, st in succs[c] if st and s in incremental) for c in comps}
        kv_from = {e.to: c for c in comps for e in model.component(c).edges if e.kv and e.to in on}
        sink = next(c for c in comps if not succs[c])
        return TypePath(
            name=type_name,
            components=comps,
            preds={c: tuple(p) for c, p in preds.items()},
            succs={c: tuple(s) for c, s in succs.items()},
            sink=next(c for c in comps if not succs[c]),
            metric=rt.first_response,
            n_preds={c: len(p) for c, p in preds.items()},
            entry=tuple(c for c in comps if not preds[c]),
            on_first=on_first,
            on_done=on_done,
            ends_feed=ends_feed,
            feed_of=feed_of,
            size=len(comps),
            joins={c: len(p) for c, p in preds.items() if len(p) > 1},
            completes={c: (on_done[c], ends_feed[c]) for c in comps},
            completes_first={c: (on_first[c] + on_done[c], ends_feed[c]) for c in comps},
            kv_from=kv_from,
            first_at=kv_from.get(sink, sink),  # prefill/decode split: the prefill's first token
        )


@mypyc_attr(allow_interpreted_subclasses=True)  # the ingress's RequestWalk is one (sim/native.py)
class Walk:
    """One request's progress on its path: milestones in, what they set free out.

    Plain slots and no time keeping of its own beyond the milestone times it is given: a
    simulation holds one per request (:class:`omniplane.sim.request.SimRequest` is one)."""

    __slots__ = ("_fed", "done", "failed", "first_out", "path", "waiting")

    def __init__(self, path: TypePath) -> None:
        self.path = path
        # components with several predecessors -> those that have not released it yet
        self.waiting = path.joins.copy() if path.joins else NO_JOINS
        self.first_out: dict[str, float] = {}  # component -> time of its first output
        self.done: dict[str, float] = {}  # component -> time of its completion
        self.failed: str | None = None  # why the request was refused
        self._fed: set[str] | None = None  # feeds known to have ended without seeing the feeder

    # ---- milestones in ---------------------------------------------------------------------
    def release(self, comp: str) -> bool:
        """One predecessor released ``comp``; True when that was the last one (it is ready)."""
        waiting = self.waiting
        if comp not in waiting:  # its only predecessor
            return True
        left = waiting[comp] - 1
        waiting[comp] = left
        return left == 0

    def unreleased(self, comp: str) -> int:
        """Predecessors that have not released ``comp`` yet. Counted for joins only: a component
        with one predecessor always reads 1 (its release makes it ready at once)."""
        return self.waiting.get(comp, self.path.n_preds[comp])

    def first_output(self, comp: str, t: float) -> tuple[str, ...]:
        """``comp`` produced its first output at ``t``: the successors that releases (once)."""
        if self.failed is not None or comp in self.first_out:
            return NOTHING
        self.first_out[comp] = t
        return self.path.on_first[comp]

    def complete(self, comp: str, t: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``comp`` finished at ``t``: (successors released, successors whose feed ended)."""
        if self.failed is not None or comp in self.done:
            return _NO_COMPLETION
        self.done[comp] = t
        if comp not in self.first_out:  # reported done without a first output: both at once
            self.first_out[comp] = t
            return self.path.completes_first[comp]
        return self.path.completes[comp]

    def fail(self, reason: str) -> None:
        self.failed = reason

    def feed_ended(self, comp: str) -> None:
        """``comp``'s streaming feeder finished where this walk does not see it (another node)."""
        if self._fed is None:
            self._fed = set()
        self._fed.add(comp)

    # ---- state out ---------------------------------------------------------------------------
    def feed_open(self, comp: str) -> bool:
        """True while ``comp`` is fed by a streaming edge whose feeder has not finished."""
        feeder = self.path.feed_of.get(comp)
        if feeder is None or feeder in self.done:
            return False
        return self._fed is None or comp not in self._fed

    @property
    def finished(self) -> bool:
        return len(self.done) == self.path.size

    @property
    def first_response(self) -> float | None:
        """Time of the type's first response (None until it happened)."""
        if self.path.metric is FirstResponse.E2E:
            return max(self.done.values()) if self.finished else None
        return self.first_out.get(self.path.first_at)
