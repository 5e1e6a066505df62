"""The ingress's request handling, independent of Ray and of the web framework.

Admission (a bounded number of requests in flight; beyond it the caller answers HTTP 503 with
``Retry-After``), idempotency by client id (a request id already running or recently finished
is attached to, never run twice), and turning the orchestrator's progress into OpenAI-style
responses. ``omniplane.deploy.serve_app`` wraps it in a Ray Serve deployment.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from omniplane.deploy import api
from omniplane.deploy.clock import VirtualClock
from omniplane.deploy.orchestrator import ERROR, FINISHED, FIRST_RESPONSE, TEXT, Orchestrator, Progress
from omniplane.spec import FirstResponse, ModelSpec
from omniplane.spec.work import ResolvedWork

KEEP_RESULTS = 4096  # assumption: finished requests remembered for idempotent replays
REQUEST_DEADLINE_S = 600.0  # assumption: wall seconds a request may run (minutes of media at 1x)
RETRY_AFTER_RANGE_S = (1, 60)  # Retry-After is whole seconds (RFC 9110); clamp the estimate


class Overloaded(Exception):
    def __init__(self, in_flight: int, retry_after_s: int) -> None:
        super().__init__(
            f"{in_flight} requests in flight: the ingress is at its limit; retry after {retry_after_s} s"
        )
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": "overloaded", "param": None, "code": 503}}


@dataclass(eq=False)
class _Running:
    rid: int
    type: str
    work: ResolvedWork
    arrival: float
    created: int
    log: list[Progress] = field(default_factory=list)
    subscribers: list[asyncio.Queue[Progress | None]] = field(default_factory=list)
    finished: bool = False
    client_id: str | None = None
    timed_out: bool = False
    task: asyncio.Task[None] | None = None

    def publish(self, p: Progress | None) -> None:
        if p is not None:
            self.log.append(p)
        else:
            self.finished = True
        for q in self.subscribers:
            q.put_nowait(p)

    async def follow(self) -> AsyncIterator[Progress]:
        q: asyncio.Queue[Progress | None] = asyncio.Queue()
        for p in self.log:
            q.put_nowait(p)
        if self.finished:
            q.put_nowait(None)
        else:
            self.subscribers.append(q)
        try:
            while (item := await q.get()) is not None:
                yield item
        finally:
            if q in self.subscribers:
                self.subscribers.remove(q)


class IngressCore:
    def __init__(
        self, model: ModelSpec, orch: Orchestrator, clock: VirtualClock, *, max_in_flight: int,
        name: str = "", deadline_s: float = REQUEST_DEADLINE_S,
    ) -> None:
        if not deadline_s > 0:
            raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
        self.deadline_s = deadline_s
        self.model = model
        self.orch = orch
        self.clock = clock
        self.max_in_flight = max_in_flight
        self.name = name or model.name
        self.in_flight = 0
        self.counts = {"accepted": 0, "shed": 0, "bad_request": 0, "finished": 0, "errors": 0, "replayed": 0,
                       "unauthorized": 0, "too_large": 0, "body_timeout": 0, "timed_out": 0, "cancelled": 0}
        self._by_id: OrderedDict[str, _Running] = OrderedDict()
        self._done_wall: deque[float] = deque(maxlen=64)
        self._tasks: set[asyncio.Task[None]] = set()
        self.metric = {rt.name: rt.first_response for rt in model.request_types}

    # ---- admission ----------------------------------------------------------------------------
    def admit(self, req: api.ParsedRequest) -> _Running:
        """Start the request, or return the one already running/finished with its id."""
        if req.client_id is not None and (known := self._by_id.get(req.client_id)) is not None:
            self.counts["replayed"] += 1
            return known
        if self.in_flight >= self.max_in_flight:
            self.counts["shed"] += 1
            raise Overloaded(self.in_flight, self._retry_after())
        run = _Running(uuid.uuid4().int >> 65, req.type, req.work, self.clock.now(), int(time.time()),
                       client_id=req.client_id)
        if req.client_id is not None:
            self._by_id[req.client_id] = run
            while len(self._by_id) > KEEP_RESULTS:
                self._by_id.popitem(last=False)
        self.in_flight += 1
        self.counts["accepted"] += 1
        task = run.task = asyncio.create_task(self._drive(run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run

    def _retry_after(self) -> int:
        """Wall seconds until a slot is likely free: the queue ahead over the completion rate."""
        lo, hi = RETRY_AFTER_RANGE_S
        done = self._done_wall
        if len(done) < 2 or done[-1] <= done[0]:
            return lo
        rate = (len(done) - 1) / (done[-1] - done[0])
        return max(lo, min(hi, math.ceil((self.in_flight - self.max_in_flight + 1) / rate)))

    async def _drive(self, run: _Running) -> None:
        try:
            async with asyncio.timeout(self.deadline_s):
                async for p in self.orch.run(run.rid, run.type, run.work, run.arrival):
                    run.publish(p)
                    if p.kind == ERROR:
                        self.counts["errors"] += 1
        except TimeoutError:  # past its deadline: cancelled (its sessions released), answered 504
            run.timed_out = True
            self.counts["timed_out"] += 1
            why = f"deadline of {self.deadline_s:g} s passed: cancelled"
            run.publish(Progress(ERROR, self.clock.now(), why))
        except asyncio.CancelledError:  # every client left (see _abandon): forget it, free the slot
            self.counts["cancelled"] += 1
            if run.client_id is not None and self._by_id.get(run.client_id) is run:
                del self._by_id[run.client_id]
            raise
        except Exception as exc:  # never leave a request without an answer
            self.counts["errors"] += 1
            run.publish(Progress(ERROR, self.clock.now(), f"internal error: {type(exc).__name__}: {exc}"))
        finally:
            self.in_flight -= 1
            self.counts["finished"] += 1
            self._done_wall.append(time.monotonic())
            run.publish(None)

    def _abandon(self, run: _Running) -> None:
        """A client stopped following ``run``: cancel it when nobody else follows it."""
        if not run.finished and not run.subscribers and run.task is not None:
            run.task.cancel()

    # ---- responses ----------------------------------------------------------------------------
    async def stream(self, run: _Running) -> AsyncIterator[bytes]:
        try:
            async for b in self._stream(run):
                yield b
        finally:  # also when the client disconnects (the response task is cancelled)
            self._abandon(run)

    async def _stream(self, run: _Running) -> AsyncIterator[bytes]:
        """Server-sent ``chat.completion.chunk`` events, ending with ``[DONE]``."""
        rid, metric = f"chatcmpl-{run.rid:x}", self.metric[run.type]
        usage = api.usage_of(self.model, run.type, run.work)

        def event(p: Any, delta: dict[str, Any], kind: str, **extra: Any) -> bytes:
            t_ms = (p.t - run.arrival) * 1e3
            return api.sse(api.chunk(rid, self.name, run.created, delta, kind, t_ms, **extra))

        async for p in run.follow():
            if p.kind == TEXT:
                yield event(p, api.text_delta(usage["completion_tokens"]), TEXT,
                            first_response=metric is FirstResponse.TTFT)
            elif p.kind == FIRST_RESPONSE and metric is FirstResponse.TTFO:
                yield event(p, api.audio_delta(rid), FIRST_RESPONSE, first_response=True)
            elif p.kind == FINISHED:
                yield event(p, {}, FINISHED, finish="stop", usage=usage,
                            first_response=metric is FirstResponse.E2E)
            elif p.kind == ERROR:
                yield api.sse(self._error(run, p.detail))
        yield api.sse("[DONE]")

    @staticmethod
    def _error(run: _Running, detail: str) -> dict[str, Any]:
        code, kind = (504, "timeout") if run.timed_out else (500, "server_error")
        return {"error": {"message": detail, "type": kind, "param": None, "code": code}}

    async def complete(self, run: _Running) -> tuple[int, dict[str, Any]]:
        """A whole ``chat.completion`` (status 200), or an error body (500; 504 past the deadline).
        Cancelled (the client left), it cancels ``run`` unless another client follows it."""
        try:
            return await self._complete(run)
        except asyncio.CancelledError:
            self._abandon(run)
            raise

    async def _complete(self, run: _Running) -> tuple[int, dict[str, Any]]:
        times: dict[str, float] = {}
        async for p in run.follow():
            if p.kind == ERROR:
                err = self._error(run, p.detail)
                return err["error"]["code"], err
            times[p.kind] = (p.t - run.arrival) * 1e3
        usage = api.usage_of(self.model, run.type, run.work)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": api.text_delta(usage["completion_tokens"])["content"],
        }
        if self.metric[run.type] is FirstResponse.TTFO:
            message["audio"] = api.audio_delta(f"{run.rid:x}")["audio"]
        return 200, {
            "id": f"chatcmpl-{run.rid:x}",
            "object": "chat.completion",
            "created": run.created,
            "model": self.name,
            "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "omniplane": {
                "type": run.type,
                "first_response_ms": times.get(FIRST_RESPONSE),
                "text_ms": times.get(TEXT),
                "e2e_ms": times.get(FINISHED),
            },
        }

    def info(self) -> dict[str, Any]:
        return {
            "model": self.model.name,
            "plan": self.orch.plan.name,
            "gpu": self.orch.plan.gpu,
            "gpus": self.orch.plan.gpus or self.orch.plan.total_gpus,
            # the plan file's latency targets (loadgen judges by them unless --slo says otherwise)
            "slo": self.orch.plan.slo.model_dump(mode="json") if self.orch.plan.slo is not None else None,
            "time_scale": self.clock.scale,
            "types": self.model.type_names,
            "max_in_flight": self.max_in_flight,
        }

    def stats(self) -> dict[str, Any]:
        return {
            **self.counts,
            "in_flight": self.in_flight,
            "session_retries": self.orch.retries,
            "replicas": dict(self.orch.replica_info),
            "open_sessions": dict(self.orch.open_sessions),
        }
