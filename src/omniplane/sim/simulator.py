"""The request-level simulator: requests walk their type's path through a plan's executors.

``Simulation.run()`` is the main loop: feed arrivals, let executors step, record milestones.
The walk's rules (what is ready, what a milestone releases) are :mod:`omniplane.sim.walk`'s;
this module decides where a ready component runs (the request's seat at the node) and when a
release lands (the plan's transfer time between nodes).
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from mypy_extensions import mypyc_attr

from omniplane.sim.eventloop import ARRIVE, DISPATCH, EventLoop
from omniplane.sim.executor import Executor
from omniplane.sim.job import Job
from omniplane.sim.metrics import ExecutorTrace, SimResult, summarise
from omniplane.sim.processes import Processes
from omniplane.sim.records import RequestRecords
from omniplane.sim.request import SimRequest, TypePath
from omniplane.sim.topology import Group, Topology
from omniplane.spec import ModelSpec

ArrivalSource = Sequence[Any]  # objects with .id, .arrival, .type, .work (omniplane.workload.Request)


@mypyc_attr(allow_interpreted_subclasses=True)  # the closed-loop client is one (sim/closedloop.py)
class Simulation:
    """One run of a workload through a topology. Deterministic for a given ``seed``."""

    def __init__(
        self,
        model: ModelSpec,
        topology: Topology,
        requests: ArrivalSource,
        *,
        loop: EventLoop,
        seed: int = 0,
        slo_s: Mapping[str, float] | None = None,
    ) -> None:
        self.model = model
        self.topo = topology
        self.loop = loop
        self.rnd = random.Random(seed)
        self.slo_s = dict(slo_s or {})
        self.paths = {t: TypePath.of(model, t) for t in model.type_names}
        self._source = requests
        self.requests: list[SimRequest] = []
        self.in_flight = 0
        self.completed = 0  # finished, including failed ones
        self.n_failed = 0
        for ex in topology.executors:
            for engine in ex.engines:
                engine.report = self
        self._transfer = topology.transfer_s
        self._edge_cost = topology.edge_cost
        self._fixed = {name: node.fixed for name, node in topology.nodes.items()}
        # types with one route: no draw
        self._route = {t: maps[0] for t, (_, maps) in topology.routes.items() if len(maps) == 1}

    # ---- main loop ------------------------------------------------------------------------
    def run(self, until: float | None = None) -> SimResult:
        """Feed every arrival, run until all requests finish (or ``until``), summarise.

        Python's cyclic garbage collector is paused meanwhile (and restored): a run keeps every
        request's state until it summarises, so each full collection would walk all of it for
        nothing (on a 200,000-customer queue that was a third of the run)."""
        t0 = time.perf_counter()
        collecting = gc.isenabled()
        gc.disable()
        try:
            self.start()
            self.loop.run(until if until is not None else float("inf"))
            return self.result(time.perf_counter() - t0)
        finally:
            if collecting:
                gc.enable()

    def start(self) -> None:
        """Put the arrivals on the event loop as its stream; ``run`` calls this."""
        self.loop.stream([r.arrival for r in self._source], self._arrive, ARRIVE)

    def _arrive(self, i: int) -> None:
        src = self._source[i]
        t = src.type
        path = self.paths[t]
        route = self._route.get(t) or self.topo.pick_route(t, self.rnd)
        req = SimRequest(src.id, t, src.arrival, src.work, path, route)
        self.requests.append(req)
        self.in_flight += 1
        for comp in path.entry:
            self._ready(req, comp)

    # ---- moving a request along its path ----------------------------------------------------
    def _ready(self, req: SimRequest, comp: str) -> None:
        """Every predecessor released ``comp``: its engine prepares the job, which joins the
        queue of the request's seat at the node now or, if the engine says so, later."""
        now = self.loop.now
        req.started[comp] = now
        name = req.nodes[comp]
        seat = self._fixed[name] or self._seat(req, name)
        job = seat.by_comp[comp].prepare(req, now)
        if comp in req.path.feed_of:
            if req.jobs is None:
                req.jobs = {}
            req.jobs[comp] = job
        if job.ready > now:
            self.loop.at(job.ready, self._offer, (seat, job), DISPATCH)
        else:
            seat.offer(job)

    def _seat(self, req: SimRequest, name: str) -> Group | Executor | Processes:
        """The request's seat at node ``name``: a group drawn by the plan's probabilities, and on
        a merged node the group's least-loaded executor, pinned until its last component there."""
        node = self.topo.nodes[name]
        if node.shared_queue:  # one component here: nothing to remember
            return node.seat(req.type, self.rnd)
        seats = req.seats
        if seats is None:
            seats = req.seats = {}
        seat = seats.get(name)
        if seat is None:
            seat = seats[name] = node.seat(req.type, self.rnd)
            left = req.left
            if left is None:
                left = req.left = {}
            left[name] = sum(1 for n in req.nodes.values() if n == name)
        return seat

    @staticmethod
    def _offer(arg: tuple[Group | Executor | Processes, Job]) -> None:
        seat, job = arg
        seat.offer(job)

    def _release(self, req: SimRequest, frm: str, to: str) -> None:
        nodes = req.nodes
        delay = self._transfer if nodes[frm] != nodes[to] else 0.0
        if delay > 0 and self._edge_cost:  # a mixed fleet: the bytes the edge carries over its link
            cost = self._edge_cost.get((frm, to, nodes[frm], nodes[to]))
            if cost is not None:
                work = req.work.get(frm, {})
                delay += cost[0] + cost[1] * sum([work.get(f, 0.0) for f in cost[2]])
        if req.path.kv_from and req.path.kv_from.get(to) == frm:  # the prefill's KV cache moves
            delay += self.topo.kv_seconds_per_token.get(frm, 0.0) * req.work[frm]["prompt_tokens"]
        if delay > 0:
            name = nodes[to]
            if self._fixed[name] is None and not self.topo.nodes[name].shared_queue:
                # the data goes to one executor of a merged node: it is chosen (and pinned) when
                # the transfer starts, by the loads then, as the deployment's router does
                self._seat(req, name)
            self.loop.at(self.loop.now + delay, self._released, (req, to), DISPATCH)
        elif req.release(to):
            self._ready(req, to)

    def _released(self, arg: tuple[SimRequest, str]) -> None:
        req, to = arg
        if req.release(to):
            self._ready(req, to)

    # ---- milestones reported by engines -------------------------------------------------------
    def first_output(self, job: Job, now: float) -> None:
        req, comp = job.req, job.comp
        for succ in req.first_output(comp, now):
            self._release(req, comp, succ)

    def done(self, job: Job, now: float) -> None:
        req, comp = job.req, job.comp
        released, feeds = req.complete(comp, now)
        if req.failed is not None:
            return
        left = req.left
        if left is not None:
            name = req.nodes[comp]
            n = left.get(name)
            if n is not None:
                left[name] = n - 1
                if n == 1:  # its last component here: unpin
                    req.seats[name].load -= 1  # type: ignore[index]
        for succ in released:
            self._release(req, comp, succ)
        jobs = req.jobs
        if jobs is not None:
            jobs.pop(comp, None)
            for succ in feeds:
                down = jobs.get(succ)
                if down is not None and down.host.feed_ended(down, now):
                    down.engine.executor.kick()
        if len(req.done) == req.path.size:
            req.finish = now
            self.in_flight -= 1
            self.completed += 1

    def failed(self, job: Job, now: float, reason: str) -> None:
        """A component refused the request: it leaves the system with an error (not lost)."""
        req = job.req
        if req.finish is not None:
            return
        req.fail(f"{job.comp}: {reason}")
        req.finish = now
        self.in_flight -= 1
        self.completed += 1
        self.n_failed += 1

    # ---- results -----------------------------------------------------------------------------
    def result(self, wall_s: float) -> SimResult:
        model = self.model
        records = RequestRecords.of(self.requests, [c.name for c in model.components],
                                    [c.name for c in model.components if c.is_llm])
        window = (float(records.arrival.min()), float(records.arrival.max())) if len(records) else (0.0, 0.0)
        horizon = self.loop.now
        tpot_comp = {t: _last_llm(model, p) for t, p in self.paths.items()}
        executors = self.topo.executors
        return SimResult(
            window_s=window[1] - window[0],
            horizon_s=horizon,
            per_type=summarise(records, self.slo_s, window, tpot_comp),
            executors={ex.name: ex.stats.summary(horizon) for ex in executors},
            arrived=len(self.requests),
            completed=self.completed,
            failed=self.n_failed,
            in_flight=self.in_flight,
            events=self.loop.events,
            wall_s=wall_s,
            requests=records,
            trace=tuple(ExecutorTrace(ex.name, ex.node, tuple(ex.stats.trace)) for ex in executors
                        if ex.stats.trace is not None),
        )


def _last_llm(model: ModelSpec, path: TypePath) -> str | None:
    llms = [c for c in path.components if model.component(c).is_llm]
    return llms[-1] if llms else None
