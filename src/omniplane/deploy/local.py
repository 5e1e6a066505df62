"""An in-process deployment: every replica a :class:`StageHost` in this event loop.

It runs the orchestrator and the emulated engines exactly as a Ray Serve deployment does, minus
Ray: useful to test the walk, the retry rules and the emulation's agreement with the simulator
without starting a cluster, and to rehearse a plan where Ray is not installed. Sessions are
pinned by join-shortest-queue on open sessions (ties: lowest index), like the simulator's
``Group.least_loaded`` and like :class:`omniplane.deploy.router.AffinityRouter`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from omniplane.deploy.clock import VirtualClock
from omniplane.deploy.messages import OpenOrder, Released, StageEvent
from omniplane.deploy.orchestrator import ERROR, FINISHED, FIRST_RESPONSE, TEXT, Orchestrator, deployment_name
from omniplane.deploy.stage import StageHost
from omniplane.loadgen.metrics import COMPLETED, FAILED, LOST, Record
from omniplane.sim import CostSource
from omniplane.spec import ResolvedPlan
from omniplane.workload import Request


class ReplicaDied(Exception):
    """The replica serving a session was killed (what Ray reports as ActorDiedError)."""


@dataclass(eq=False)
class _Replica:
    host: StageHost
    dead: asyncio.Event = field(default_factory=asyncio.Event)
    load: int = 0


class LocalTransport:
    def __init__(self, make: dict[str, list[StageHost]]) -> None:
        self.replicas = {dep: [_Replica(h) for h in hosts] for dep, hosts in make.items()}
        self.pins: dict[tuple[str, int], _Replica] = {}

    def _choose(self, dep: str, rid: int) -> _Replica:
        pinned = self.pins.get((dep, rid))
        reps = self.replicas[dep]
        if pinned is not None and pinned in reps:
            return pinned
        best = min(reps, key=lambda r: r.load)  # ties: the lowest index
        self.pins[(dep, rid)] = best
        return best

    async def open(self, deployment: str, order: OpenOrder) -> AsyncIterator[StageEvent]:
        rep = self._choose(deployment, order.rid)
        rep.load += 1
        stream = rep.host.open(order)
        dead = asyncio.ensure_future(rep.dead.wait())
        nxt: asyncio.Future[StageEvent] | None = None
        try:
            while True:
                nxt = asyncio.ensure_future(anext(stream))
                await asyncio.wait({nxt, dead}, return_when=asyncio.FIRST_COMPLETED)
                if not nxt.done():
                    raise ReplicaDied(f"replica of {deployment} serving request {order.rid} died")
                try:
                    ev = nxt.result()
                except StopAsyncIteration:
                    self.pins.pop((deployment, order.rid), None)
                    return
                yield ev
        finally:
            dead.cancel()
            rep.load -= 1
            if nxt is not None:  # collect it even if it is done, so no exception goes unseen
                nxt.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await nxt
            await stream.aclose()

    async def release(self, deployment: str, rid: int, rel: Released) -> bool:
        rep = self.pins.get((deployment, rid))
        if rep is None or rep.dead.is_set():
            raise ReplicaDied(f"no live replica of {deployment} holds request {rid}")
        return rep.host.release(rid, rel)

    async def upstream_done(self, deployment: str, rid: int, comp: str) -> bool:
        rep = self.pins.get((deployment, rid))
        if rep is None or rep.dead.is_set():
            raise ReplicaDied(f"no live replica of {deployment} holds request {rid}")
        return rep.host.upstream_done(rid, comp)

    def kill(self, deployment: str, index: int, replacement: StageHost) -> int:
        """Kill replica ``index`` (its sessions fail) and start ``replacement`` in its place;
        returns how many sessions it held."""
        rep = self.replicas[deployment][index]
        held = len(rep.host.sessions)
        rep.dead.set()
        self.replicas[deployment][index] = _Replica(replacement)
        return held


def local_hosts(plan: ResolvedPlan, cost: CostSource, clock: VirtualClock) -> dict[str, list[StageHost]]:
    """One :class:`StageHost` per plan executor, grouped by deployment."""
    out: dict[str, list[StageHost]] = {}
    for node in plan.spec.nodes:
        for gi, group in enumerate(node.executors):
            dep = deployment_name(node.name, gi)
            out[dep] = [
                StageHost(
                    plan.model, node.name, node.components, group, plan.gpu, cost, clock, replica=f"{dep}#{k}"
                )
                for k in range(group.count)
            ]
    return out


def local_deployment(
    plan: ResolvedPlan, cost: CostSource, clock: VirtualClock, *, seed: int = 0, max_attempts: int = 4
) -> tuple[Orchestrator, LocalTransport]:
    transport = LocalTransport(local_hosts(plan, cost, clock))
    return Orchestrator(plan.model, plan.spec, transport, seed=seed, max_attempts=max_attempts), transport


async def replay_local(
    orch: Orchestrator, requests: Sequence[Request], clock: VirtualClock, offset: float = 0.0
) -> list[Record]:
    """Send ``requests`` into an in-process deployment at their arrival times (model seconds
    after ``offset`` on ``clock``) and record what a client would see."""

    async def one(req: Request) -> Record:
        await clock.sleep_until(offset + req.arrival)
        start = clock.now() - offset
        text = first = None
        audio = False
        async for p in orch.run(req.id, req.type, req.work, start + offset):
            now = clock.now() - offset
            if p.kind == TEXT:
                text = now
            elif p.kind == FIRST_RESPONSE:
                first, audio = now, p.detail == "ttfo"
            elif p.kind == FINISHED:
                return Record(
                    req.id,
                    req.type,
                    req.arrival,
                    start,
                    COMPLETED,
                    now,
                    text,
                    first if audio else None,
                    first,
                    _output_tokens(req),
                )
            elif p.kind == ERROR:
                return Record(req.id, req.type, req.arrival, start, FAILED, now, error=p.detail)
        return Record(req.id, req.type, req.arrival, start, LOST, error="no end")

    return list(await asyncio.gather(*(one(r) for r in requests)))


def _output_tokens(req: Request) -> int:
    outs = [int(w["output_tokens"]) for w in req.work.values() if "output_tokens" in w]
    return outs[0] if outs else 0
