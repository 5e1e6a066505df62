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
        self, model: ModelSpec, orch: Orchestrator, clock: VirtualClock, *, max_in_flight: int, name: str = ""
    ) -> None:
        self.model = model
        self.orch = orch
        self.clock = clock
        self.max_in_flight = max_in_flight
        self.name = name or model.name
        self.in_flight = 0
        self.counts = {"accepted": 0, "shed": 0, "bad_request": 0, "finished": 0, "errors": 0, "replayed": 0,
                       "unauthorized": 0, "too_large": 0}
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
        run = _Running(uuid.uuid4().int >> 65, req.type, req.work, self.clock.now(), int(time.time()))
        if req.client_id is not None:
            self._by_id[req.client_id] = run
            while len(self._by_id) > KEEP_RESULTS:
                self._by_id.popitem(last=False)
        self.in_flight += 1
        self.counts["accepted"] += 1
        task = asyncio.create_task(self._drive(run))
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
            async for p in self.orch.run(run.rid, run.type, run.work, run.arrival):
                run.publish(p)
                if p.kind == ERROR:
                    self.counts["errors"] += 1
        except Exception as exc:  # never leave a request without an answer
            self.counts["errors"] += 1
            run.publish(Progress(ERROR, self.clock.now(), f"internal error: {type(exc).__name__}: {exc}"))
        finally:
            self.in_flight -= 1
            self.counts["finished"] += 1
            self._done_wall.append(time.monotonic())
            run.publish(None)

    # ---- responses ----------------------------------------------------------------------------
    async def stream(self, run: _Running) -> AsyncIterator[bytes]:
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
                yield api.sse(
                    {"error": {"message": p.detail, "type": "server_error", "param": None, "code": 500}}
                )
        yield api.sse("[DONE]")

    async def complete(self, run: _Running) -> tuple[int, dict[str, Any]]:
        """A whole ``chat.completion`` (status 200), or an error body (status 500)."""
        times: dict[str, float] = {}
        async for p in run.follow():
            if p.kind == ERROR:
                return 500, {
                    "error": {"message": p.detail, "type": "server_error", "param": None, "code": 500}
                }
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
