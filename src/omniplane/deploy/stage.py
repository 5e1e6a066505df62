"""The emulated stage engine: one replica of a plan node, stepping the simulator's executor in
real time.

A :class:`StageHost` builds the simulator's executor and engines for the node's components
(through :func:`omniplane.sim.build_topology` on a one-executor plan, so batching, chunked
prefill, KV capacity, decode spans and vocoder streaming are the simulator's own code) and
drives them with a :class:`RealTimeLoop`. Each request's progress here is the simulator's
request walk (:class:`omniplane.sim.walk.Walk`, inside a ``SimRequest``) restricted to the
components this node serves: local edges are released here, edges to other nodes are reported
as events for the ingress to forward (:mod:`omniplane.deploy.walk`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from omniplane.deploy.clock import RealTimeLoop, VirtualClock
from omniplane.deploy.messages import DONE, END, FAILED, FIRST, OPENED, OpenOrder, Released, StageEvent
from omniplane.sim import CostSource, build_topology
from omniplane.sim.job import Job
from omniplane.sim.request import SimRequest
from omniplane.sim.walk import TypePath
from omniplane.spec import ExecutorGroup, GPUKind, ModelSpec, PlanNode, PlanSpec, Route


@dataclass(eq=False)
class _Session:
    req: SimRequest
    comps: frozenset[str]
    queue: asyncio.Queue[StageEvent | None]
    remaining: set[str]
    released: set[tuple[str, str]] = field(default_factory=set)  # (comp, pred) counted
    log: list[StageEvent] = field(default_factory=list)
    closed: bool = False


class StageHost:
    """One executor of plan node ``node`` (group ``group``) on the emulated engine."""

    def __init__(
        self,
        model: ModelSpec,
        node: str,
        components: list[str],
        group: ExecutorGroup,
        gpu: GPUKind,
        cost: CostSource,
        clock: VirtualClock,
        replica: str = "",
    ) -> None:
        self.model = model
        self.node = node
        self.replica = replica or node
        self.loop = RealTimeLoop(clock)
        comps = model.ordered(components)
        one = PlanSpec(
            model=model.name,
            gpu=gpu.name,
            nodes=[
                PlanNode(
                    name=node,
                    components=comps,
                    executors=[ExecutorGroup(count=1, tp=group.tp, max_batch=group.max_batch)],
                )
            ],
            routes={t: [Route(nodes=[node], p=1.0)] for t in model.type_names},
        )
        topo = build_topology(model, one, gpu, cost, self.loop)
        [self.executor] = topo.executors
        pnode = topo.nodes[node]
        # where a job waits: the group's shared queue on a single-component node, as in the simulator
        self.seat = pnode.groups[0] if pnode.shared_queue else self.executor
        for engine in self.executor.engines:
            engine.report = self
        self.paths = {t: TypePath.of(model, t) for t in model.type_names}
        self.sessions: dict[int, _Session] = {}
        self.opened = 0

    # ---- calls from the ingress -------------------------------------------------------------
    async def open(self, order: OpenOrder) -> AsyncGenerator[StageEvent, None]:
        """Start (or re-attach to) the request's session here; stream its events to the end."""
        self.loop.sync()
        s = self.sessions.get(order.rid)
        if s is not None:  # the same request again (a retried call): attach to what runs here
            old, s.queue = s.queue, asyncio.Queue()
            old.put_nowait(None)
            for ev in s.log:
                s.queue.put_nowait(ev)
            self._apply(s, order)
        else:
            s = self._start(order)
        queue = s.queue
        yield StageEvent(OPENED, t=self.loop.now, info={"replica": self.replica})
        while (item := await queue.get()) is not None:
            yield item

    def release(self, rid: int, rel: Released) -> bool:
        """A predecessor on another node released ``rel.comp``; False if no such session."""
        s = self.sessions.get(rid)
        if s is None:
            return False
        self.loop.sync()
        self._schedule_release(s, rel)
        return True

    def upstream_done(self, rid: int, comp: str) -> bool:
        """The LLM feeding streaming vocoder ``comp`` (on another node) has finished."""
        s = self.sessions.get(rid)
        if s is None:
            return False
        self.loop.sync()
        self._feed_ended(s, comp)
        return True

    def stats(self) -> dict[str, Any]:
        horizon = max(self.loop.sync(), 1e-9)
        return {
            "replica": self.replica,
            "node": self.node,
            "sessions_open": len(self.sessions),
            "sessions_total": self.opened,
            "executor": self.executor.stats.summary(horizon),
            "timer_lag": self.loop.lag.summary(),
            "errors": list(self.loop.errors[-5:]),
        }

    def _brief(self, now: float) -> dict[str, str]:
        """Health figures carried on each session's end event (the ingress keeps the latest)."""
        lag = self.loop.lag.summary()
        busy = self.executor.stats.busy / now if now > 0 else 0.0
        return {
            "replica": self.replica,
            "timer_lag_p99_ms": f"{lag['p99_ms']:.3f}",
            "timer_lag_max_ms": f"{lag['max_ms']:.3f}",
            "busy": f"{busy:.4f}",
            "errors": str(len(self.loop.errors)),
        }

    # ---- the request walk on this node --------------------------------------------------------
    def _start(self, order: OpenOrder) -> _Session:
        path = self.paths[order.type]
        req = SimRequest(order.rid, order.type, order.arrival, order.work, path, dict(order.nodes))
        s = _Session(req, frozenset(order.comps), asyncio.Queue(), set(order.comps))
        self.sessions[order.rid] = s
        self.opened += 1
        self._apply(s, order)
        for comp in order.comps:  # components whose predecessors are all released already
            if req.unreleased(comp) == 0 and comp not in req.started:
                self._ready(s, comp)
        return s

    def _apply(self, s: _Session, order: OpenOrder) -> None:
        """The releases and upstream notices an order carries (repeats are ignored)."""
        for rel in order.released:
            self._schedule_release(s, rel)
        for comp in order.upstream_done:
            self._feed_ended(s, comp)

    def _schedule_release(self, s: _Session, rel: Released) -> None:
        if rel.comp not in s.comps or (rel.comp, rel.pred) in s.released:
            return
        s.released.add((rel.comp, rel.pred))
        if rel.ready_at > self.loop.now:
            self.loop.at(rel.ready_at, self._pred_arrived, (s, rel.comp))
        else:
            self._pred_arrived((s, rel.comp))

    def _pred_arrived(self, arg: tuple[_Session, str]) -> None:
        s, comp = arg
        if not s.closed and s.req.release(comp):
            self._ready(s, comp)

    def _ready(self, s: _Session, comp: str) -> None:
        """As in the simulator: the engine prepares the job, which joins the queue when ready."""
        req, now = s.req, self.loop.now
        req.started[comp] = now
        job = self.seat.by_comp[comp].prepare(req, now)
        if comp in req.path.feed_of:
            if req.jobs is None:
                req.jobs = {}
            req.jobs[comp] = job
        if job.ready > now:
            self.loop.at(job.ready, self._offer, job)
        else:
            self.seat.offer(job)

    def _offer(self, job: Job) -> None:
        self.seat.offer(job)

    def _feed_ended(self, s: _Session, comp: str) -> None:
        """The streaming feeder of ``comp`` finished on another node (repeats are ignored)."""
        if comp not in s.comps or not s.req.feed_open(comp):
            return
        s.req.feed_ended(comp)
        job = s.req.jobs.get(comp) if s.req.jobs else None
        if job is not None and job.host.feed_ended(job, self.loop.now):
            self.executor.kick()

    def _emit(self, s: _Session, ev: StageEvent) -> None:
        s.log.append(ev)
        s.queue.put_nowait(ev)

    def _close(self, s: _Session, ev: StageEvent) -> None:
        self._emit(s, ev)
        s.closed = True
        s.queue.put_nowait(None)
        self.sessions.pop(s.req.rid, None)

    # ---- milestones reported by the simulator's engines (the Reporter protocol) ---------------
    def _session_of(self, job: Job) -> _Session | None:
        s = self.sessions.get(job.req.rid)
        return s if s is not None and s.req is job.req else None  # a stale job of a closed session

    def first_output(self, job: Job, now: float) -> None:
        s = self._session_of(job)
        if s is None or job.comp in s.req.first_out:
            return
        self._emit(s, StageEvent(FIRST, job.comp, now))
        for succ in s.req.first_output(job.comp, now):
            if succ in s.comps:
                self._schedule_release(s, Released(succ, job.comp, now))

    def done(self, job: Job, now: float) -> None:
        s = self._session_of(job)
        req, comp = job.req, job.comp
        if s is None or comp in req.done:
            return
        if comp not in req.first_out:  # one-shot engines report the completion only
            self._emit(s, StageEvent(FIRST, comp, now))
        self._emit(s, StageEvent(DONE, comp, now))
        released, feeds = req.complete(comp, now)
        for succ in released:
            if succ in s.comps:
                self._schedule_release(s, Released(succ, comp, now))
        for succ in feeds:
            down = req.jobs.get(succ) if req.jobs and succ in s.comps else None
            if down is not None and down.host.feed_ended(down, now):
                self.executor.kick()
        s.remaining.discard(comp)
        if not s.remaining:
            self._close(s, StageEvent(END, t=now, info=self._brief(now)))

    def failed(self, job: Job, now: float, reason: str) -> None:
        s = self._session_of(job)
        if s is not None:
            self._close(s, StageEvent(FAILED, job.comp, now, {"reason": reason}))
