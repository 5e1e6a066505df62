"""The request-level simulator: requests walk their type's path through a plan's executors.

``Simulation.run()`` is the main loop: feed arrivals, let executors step, record milestones.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from omniplane.sim.eventloop import ARRIVE, DISPATCH, EventLoop
from omniplane.sim.engines import VocoderEngine
from omniplane.sim.job import Job
from omniplane.sim.metrics import SimResult, summarise
from omniplane.sim.request import SimRequest, TypePath
from omniplane.sim.topology import Topology
from omniplane.spec import FirstResponse, GeneratorKind, ModelSpec

ArrivalSource = Sequence[Any]  # objects with .id, .arrival, .type, .work (omniplane.workload.Request)


class Simulation:
    """One run of a workload through a topology. Deterministic for a given ``seed``."""

    def __init__(
        self,
        model: ModelSpec,
        topology: Topology,
        requests: ArrivalSource,
        *,
        seed: int = 0,
        slo_s: Mapping[str, float] | None = None,
        cpu_seconds: Callable[[str], float] | None = None,
        loop: EventLoop | None = None,
        observe: Callable[[SimRequest, str], None] | None = None,
    ) -> None:
        self.model = model
        self.topo = topology
        self.loop = loop or EventLoop()
        self.rnd = random.Random(seed)
        self.slo_s = dict(slo_s or {})
        self.paths = {t: TypePath.of(model, t) for t in model.type_names}
        cpu = cpu_seconds or model.cpu_seconds_per_item
        self.cpu_seconds = {c.name: cpu(c.name) for c in model.components}
        self._vocoders = {c.name for c in model.components if c.generator is GeneratorKind.VOCODER}
        self._source = requests
        self.requests: list[SimRequest] = []
        self.in_flight = 0
        self.completed = 0  # finished, including failed ones
        self.n_failed = 0
        self.observe = observe  # called on each milestone: (request, "component:event")
        for ex in topology.executors:
            for engine in ex.engines:
                engine.report = self

    # ---- main loop ------------------------------------------------------------------------
    def run(self, until: float | None = None) -> SimResult:
        """Feed every arrival, run until all requests finish (or ``until``), summarise."""
        t0 = time.perf_counter()
        self.start()
        self.loop.run(until if until is not None else float("inf"))
        return self.result(time.perf_counter() - t0)

    def start(self) -> None:
        """Queue the first arrival (each arrival queues the next); ``run`` calls this."""
        self._next_arrival(iter(self._source))

    def _next_arrival(self, arrivals: Iterator[Any]) -> None:
        req = next(arrivals, None)
        if req is not None:
            self.loop.at(req.arrival, self._arrive, (req, arrivals), ARRIVE)

    def _arrive(self, arg: tuple[Any, Iterator[Any]]) -> None:
        src, arrivals = arg
        self._next_arrival(arrivals)
        path = self.paths[src.type]
        req = SimRequest(src.id, src.type, src.arrival, src.work, path,
                         self.topo.pick_route(src.type, self.rnd))
        self.requests.append(req)
        self.in_flight += 1
        for comp in path.components:
            if req.waiting_on[comp] == 0:
                self._ready(req, comp)

    # ---- moving a request along its path ----------------------------------------------------
    def _ready(self, req: SimRequest, comp: str) -> None:
        """All predecessors released ``comp``: hand the request to its executor there."""
        now = self.loop.now
        req.started[comp] = now
        node = self.topo.nodes[req.nodes[comp]]
        gi = req.groups.get(node.name)
        if gi is None:
            gi = req.groups[node.name] = node.pick_group(req.type, self.rnd)
        group = node.groups[gi]
        if node.shared_queue:
            executors = group.executors
        else:  # a merged node: the request stays on one executor for all its components there
            idx = req.executors.get(node.name)
            if idx is None:
                idx = req.executors[node.name] = group.least_loaded()
                group.executors[idx].load += 1
                req.node_left[node.name] = sum(1 for n in req.nodes.values() if n == node.name)
            executors = [group.executors[idx]]
        engine = executors[0].by_comp[comp]
        job = Job(req, comp, now)
        req.jobs[comp] = job
        kind = engine.kind
        if kind == "vocode":
            assert isinstance(engine, VocoderEngine)
            feeders = req.path.preds[comp]
            streaming = bool(feeders) and dict(req.path.succs[feeders[0]])[comp]
            engine.prepare(job, streaming)
            job.upstream_done = not streaming or feeders[0] in req.done
        elif kind == "llm":
            feeder = req.path.llm_stream_feeder.get(comp)
            if feeder is not None:  # only the feeding LLM's first token exists when this starts
                job.prompt_cut = int(req.work[feeder]["output_tokens"]) - 1
        if kind == "encode":
            cpu = self.cpu_seconds[comp] * req.work[comp]["items"]
            if cpu > 0:
                # preprocessing overlaps with whatever the GPU is doing; one request's inputs on
                # one executor are preprocessed one after another
                key = (node.name, id(executors[0]) if len(executors) == 1 else 0)
                start = max(now, req.cpu_free.get(key, now))
                job.ready = req.cpu_free[key] = start + cpu
                self.loop.at(job.ready, self._enqueue, (engine, job, executors, node.shared_queue),
                             DISPATCH)
                return
        self._enqueue((engine, job, executors, node.shared_queue))

    def _enqueue(self, arg: tuple[Any, Job, list[Any], bool]) -> None:
        engine, job, executors, shared = arg
        engine.add(job, shared)
        if len(executors) == 1:
            executors[0].kick()
            return
        for ex in executors:  # idle executors of the group pull it first
            if not ex.busy:
                ex.kick()
        if shared and job.engine is None:
            for ex in executors:  # still waiting: busy ones take it at their next iteration
                if ex.busy:
                    ex.kick()

    def _release(self, req: SimRequest, frm: str, to: str) -> None:
        if req.nodes[frm] != req.nodes[to] and self.topo.transfer_s > 0:
            self.loop.after(self.topo.transfer_s, self._pred_arrived, (req, to), DISPATCH)
        else:
            self._pred_arrived((req, to))

    def _pred_arrived(self, arg: tuple[SimRequest, str]) -> None:
        req, to = arg
        req.waiting_on[to] -= 1
        if req.waiting_on[to] == 0:
            self._ready(req, to)

    # ---- milestones reported by engines -------------------------------------------------------
    def first_output(self, job: Job, now: float) -> None:
        req, comp = job.req, job.comp
        if comp in req.first_out or req.failed:
            return
        req.first_out[comp] = now
        if self.observe:
            self.observe(req, f"{comp}:first")
        for succ, streaming in req.path.succs[comp]:
            if streaming:
                self._release(req, comp, succ)
        if comp == req.path.sink and req.path.metric is not FirstResponse.E2E:
            req.first_response = now

    def done(self, job: Job, now: float) -> None:
        req, comp = job.req, job.comp
        if req.failed:
            return
        req.done[comp] = now
        node_name = req.nodes[comp]
        idx = req.executors.get(node_name)
        if idx is not None:
            req.node_left[node_name] -= 1
            if req.node_left[node_name] == 0:  # its last component here: unpin
                node = self.topo.nodes[node_name]
                node.groups[req.groups[node_name]].executors[idx].load -= 1
        if self.observe:
            self.observe(req, f"{comp}:done")
        for succ, streaming in req.path.succs[comp]:
            if not streaming:
                self._release(req, comp, succ)
            elif succ in self._vocoders:
                downstream = req.jobs.get(succ)
                if downstream is not None:
                    self._upstream_finished(req, succ, downstream, now)
        if len(req.done) == len(req.path.components):
            req.finish = now
            if req.path.metric is FirstResponse.E2E:
                req.first_response = now
            self.in_flight -= 1
            self.completed += 1

    def failed(self, job: Job, now: float, reason: str) -> None:
        """A component refused the request: it leaves the system with an error (not lost)."""
        req = job.req
        if req.finish is not None:
            return
        req.failed = f"{job.comp}: {reason}"
        req.finish = now
        self.in_flight -= 1
        self.completed += 1
        self.n_failed += 1

    def _upstream_finished(self, req: SimRequest, comp: str, job: Job, now: float) -> None:
        """The LLM feeding a streaming vocoder finished: the rest of the audio may be voiced."""
        engine = job.engine
        if engine is None:  # its first chunk has not started: it will see the flag when done
            job.upstream_done = True
        elif engine.upstream_finished(job, now):
            engine.executor.kick()

    # ---- results -----------------------------------------------------------------------------
    def result(self, wall_s: float) -> SimResult:
        arrivals = [r.arrival for r in self.requests]
        window = (min(arrivals), max(arrivals)) if arrivals else (0.0, 0.0)
        horizon = self.loop.now
        tpot_comp = {t: _last_llm(self.model, p) for t, p in self.paths.items()}
        return SimResult(
            window_s=window[1] - window[0],
            horizon_s=horizon,
            per_type=summarise(self.requests, self.slo_s, window, tpot_comp),
            executors={ex.name: ex.stats.summary(horizon) for ex in self.topo.executors},
            arrived=len(self.requests),
            completed=self.completed,
            failed=self.n_failed,
            in_flight=self.in_flight,
            events=self.loop.events,
            wall_s=wall_s,
        )


def _last_llm(model: ModelSpec, path: TypePath) -> str | None:
    llms = [c for c in path.components if model.component(c).is_llm]
    return llms[-1] if llms else None

