"""Run one request through a deployed plan: pick its route and executor groups, open a session
on each node it needs, forward releases between nodes, report progress, retry sessions whose
replica died.

The orchestrator talks to node replicas through a :class:`Transport` (Ray Serve handles in a
deployment, direct calls in-process for tests), so the walk and the retry rules are the same
code in both.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Protocol

from omniplane.deploy.messages import END, FAILED, OPENED, OpenOrder, Released, StageEvent
from omniplane.deploy.walk import Notify, RequestWalk, Send
from omniplane.sim.walk import TypePath
from omniplane.spec import ModelSpec, PlanSpec
from omniplane.spec.work import ResolvedWork

log = logging.getLogger(__name__)

TEXT, FIRST_RESPONSE, FINISHED, ERROR = "text", "first_response", "finished", "error"
RETRY_BACKOFF_S = 0.05  # assumption: wall seconds before re-opening a session whose replica failed


def deployment_name(node: str, group: int) -> str:
    """The Serve deployment of executor group ``group`` of plan node ``node``."""
    return f"{node}-g{group}"


class Transport(Protocol):
    """How the orchestrator reaches node replicas. ``open`` must pin the request to one replica
    of the deployment: later ``release``/``upstream_done`` calls for it go to that replica."""

    def open(self, deployment: str, order: OpenOrder) -> AsyncIterator[StageEvent]: ...

    async def release(self, deployment: str, rid: int, rel: Released) -> bool: ...

    async def upstream_done(self, deployment: str, rid: int, comp: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class Progress:
    """What the client learns: the text stream started, the first response (TTFT/TTFO/E2E by
    type), the request finished, or failed."""

    kind: str
    t: float
    detail: str = ""


class SessionLost(Exception):
    """A session's replica stopped answering for it (died, or lost the session)."""


@dataclass(eq=False)
class _Live:
    node: str
    deployment: str
    attempt: int
    task: asyncio.Task[None] | None = None
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False

    def ended_ok(self, walk: RequestWalk) -> bool:
        """An END is only good if the walk saw every component of this node done."""
        return all(c in walk.done for c in walk.node_comps(self.node))


class Orchestrator:
    def __init__(
        self, model: ModelSpec, plan: PlanSpec, transport: Transport, *, seed: int = 0, max_attempts: int = 4
    ) -> None:
        self.model = model
        self.plan = plan
        self.transport = transport
        self.rnd = random.Random(seed)
        self.max_attempts = max_attempts
        self.paths = {t: TypePath.of(model, t) for t in model.type_names}
        self.transfer_s = plan.transfer_ms / 1e3
        self.retries = 0  # sessions re-opened after a failure (all requests)
        self.replica_info: dict[str, dict[str, str]] = {}  # latest health figures per replica
        self.open_sessions: dict[str, int] = {}  # replica id -> sessions of this ingress on it now
        self.routes: dict[str, tuple[list[float], list[dict[str, str]]]] = {}
        for t, rlist in plan.routes.items():
            path = set(model.path_of(t))
            maps = [{c: n for n in r.nodes for c in plan.node(n).components if c in path} for r in rlist]
            self.routes[t] = (list(accumulate(r.p for r in rlist)), maps)
        self.group_cum = {
            (n.name, t): list(accumulate(n.group_probs(t))) for n in plan.nodes for t in model.type_names
        }

    def deployments(self) -> list[str]:
        return [deployment_name(n.name, g) for n in self.plan.nodes for g in range(len(n.executors))]

    def _pick(self, cum: list[float]) -> int:
        if len(cum) == 1:
            return 0
        return min(bisect.bisect_right(cum, self.rnd.random() * cum[-1]), len(cum) - 1)

    async def run(
        self, rid: int, type_name: str, work: ResolvedWork, arrival: float
    ) -> AsyncIterator[Progress]:
        """Walk one request to the end; yields :class:`Progress`, ends after FINISHED or ERROR."""
        if type_name not in self.routes:
            yield Progress(ERROR, arrival, f"the plan has no route for request type {type_name!r}")
            return
        cum, maps = self.routes[type_name]
        nodes = maps[self._pick(cum)]
        deps = {
            n: deployment_name(n, self._pick(self.group_cum[(n, type_name)])) for n in set(nodes.values())
        }
        walk = RequestWalk(self.model, self.paths[type_name], nodes, self.transfer_s, rid, arrival, work)
        inbox: asyncio.Queue[tuple[_Live, StageEvent | BaseException]] = asyncio.Queue()
        live: dict[str, _Live] = {}
        chores: set[asyncio.Task[None]] = set()
        sent_first = sent_text = False

        def open_session(node: str, attempt: int) -> None:
            s = _Live(node, deps[node], attempt)
            live[node] = s
            s.task = asyncio.create_task(self._pump(s, walk.order_for(node, type_name, attempt), inbox))

        try:
            for node in walk.entry_nodes():
                open_session(node, 0)
            while not walk.finished:
                s, item = await inbox.get()
                if live.get(s.node) is not s:
                    continue  # from a session already replaced
                if isinstance(item, BaseException) or (item.kind == END and not s.ended_ok(walk)):
                    if s.attempt + 1 >= self.max_attempts:
                        yield Progress(
                            ERROR,
                            arrival,
                            f"node {s.node}: {_describe(item)} (gave up after {self.max_attempts} attempts)",
                        )
                        return
                    log.warning(
                        "request %s: session on %s failed (%s); retrying", rid, s.node, _describe(item)
                    )
                    self.retries += 1
                    await asyncio.sleep(RETRY_BACKOFF_S * (s.attempt + 1))
                    open_session(s.node, s.attempt + 1)
                    continue
                if item.kind == OPENED:
                    s.opened.set()
                    continue
                if item.kind == FAILED:
                    yield Progress(ERROR, item.t, f"{item.comp}: {item.info.get('reason', 'refused')}")
                    return
                for action in walk.on_event(s.node, item):
                    target = live.get(action.node)
                    if target is None:
                        open_session(action.node, 0)  # the order carries the release
                    else:
                        task = asyncio.create_task(self._forward(target, rid, action, inbox))
                        chores.add(task)
                        task.add_done_callback(chores.discard)
                if not sent_text and walk.text_comp and walk.text_comp in walk.first_out:
                    sent_text = True
                    yield Progress(TEXT, walk.first_out[walk.text_comp])
                if not sent_first and (fr := walk.first_response) is not None:
                    sent_first = True
                    yield Progress(FIRST_RESPONSE, fr, walk.path.metric.value)
            yield Progress(FINISHED, max(walk.done.values()))
        finally:
            for s in live.values():
                if s.task is not None and not s.task.done():
                    s.task.cancel()
            for task in chores:
                task.cancel()

    async def _pump(
        self, s: _Live, order: OpenOrder, inbox: asyncio.Queue[tuple[_Live, StageEvent | BaseException]]
    ) -> None:
        """Read one session's stream into the request's inbox; a broken stream becomes an error."""
        replica = ""
        try:
            async for ev in self.transport.open(s.deployment, order):
                if ev.kind == OPENED and not replica:
                    replica = ev.info.get("replica", "")
                    self.open_sessions[replica] = self.open_sessions.get(replica, 0) + 1
                if ev.kind == END:
                    s.ended = True
                    if "replica" in ev.info:
                        self.replica_info[ev.info["replica"]] = {"deployment": s.deployment, **ev.info}
                inbox.put_nowait((s, ev))
            if not s.ended:
                inbox.put_nowait((s, SessionLost("the stream ended without an end event")))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the replica died or the call failed: the orchestrator retries
            inbox.put_nowait((s, exc))
        finally:
            if replica:
                left = self.open_sessions.get(replica, 0) - 1
                if left > 0:
                    self.open_sessions[replica] = left
                else:
                    self.open_sessions.pop(replica, None)

    async def _forward(
        self,
        s: _Live,
        rid: int,
        action: Send | Notify,
        inbox: asyncio.Queue[tuple[_Live, StageEvent | BaseException]],
    ) -> None:
        """Deliver a release/notice once the session is pinned; a replica that does not know
        the session (it died and was replaced) makes the session be re-opened."""
        await s.opened.wait()
        try:
            if isinstance(action, Send):
                ok = await self.transport.release(s.deployment, rid, action.rel)
            else:
                ok = await self.transport.upstream_done(s.deployment, rid, action.comp)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            ok, why = False, _describe(exc)
        else:
            why = "the replica does not know the session"
        if not ok and not s.ended:
            inbox.put_nowait((s, SessionLost(why)))


def _describe(item: StageEvent | BaseException) -> str:
    if isinstance(item, BaseException):
        return f"{type(item).__name__}: {str(item).splitlines()[0] if str(item) else ''}"
    return f"stream ended ({item.kind})"
