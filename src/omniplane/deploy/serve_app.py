"""A plan as a Ray Serve application: one deployment per executor group of each plan node, with
the group's replica count and GPUs per replica, and an HTTP ingress in front.

Imported only when deploying (it imports Ray). Replicas run a stage engine built by
:func:`omniplane.deploy.engines.make_stage_engine`; calls between the ingress and the node
replicas are Ray Serve handle calls (a streaming call per session, pinned to one replica by
:class:`omniplane.deploy.router.AffinityRouter`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle, DeploymentResponseGenerator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from omniplane.deploy import api
from omniplane.deploy.asgi import read_body, unless_disconnected
from omniplane.deploy.auth import Guard, Refused
from omniplane.deploy.clock import VirtualClock
from omniplane.deploy.engines import make_stage_engine
from omniplane.deploy.ingress import REQUEST_DEADLINE_S, IngressCore, Overloaded
from omniplane.deploy.messages import OpenOrder, Released, StageEvent
from omniplane.deploy.orchestrator import Orchestrator, deployment_name
from omniplane.deploy.replica_bind import replica_grpc_on_node_address
from omniplane.spec import ResolvedPlan

NODE_MAX_ONGOING = 100_000  # sessions queue inside the stage engine, never in Serve
INGRESS_SLACK = 64  # Serve-level headroom above the ingress's own admission limit


@dataclass(frozen=True)
class DeployOptions:
    """How to deploy: engine, time scale and epoch (emulated), admission limit, retries."""

    engine: str = "emulated"
    time_scale: float = 1.0
    epoch: float = 0.0  # time.time() at which model time 0 starts (set by deploy())
    max_in_flight: int = 1024  # assumption: requests the ingress admits before shedding with 503
    deadline_s: float = REQUEST_DEADLINE_S  # wall seconds a request may run before 504 (ingress.py)
    max_attempts: int = 4  # sessions tried per node per request (first try + retries)
    ingress_replicas: int = 1
    seed: int = 0
    guard: Guard = field(default_factory=Guard)  # API-key digests and request limits (deploy/auth.py)
    engine_model: str = ""  # vllm: the weights each replica loads (default: the tiny fixture's)

    @property
    def clock(self) -> VirtualClock:
        return VirtualClock(self.epoch, self.time_scale)


ROUTER = "omniplane.deploy.router.AffinityRouter"


class NodeReplica:
    """One executor of a plan node; the stage engine does the work."""

    def __init__(self, plan: ResolvedPlan, options: DeployOptions, node: str, group: int) -> None:
        replica_grpc_on_node_address()
        ctx = serve.get_replica_context()
        self.engine = make_stage_engine(
            options.engine,
            plan,
            node,
            group,
            options.clock,
            replica=ctx.replica_id.unique_id,
            engine_model=options.engine_model,
        )

    async def open(self, order: OpenOrder, affinity: str = "") -> AsyncIterator[StageEvent]:
        async for ev in self.engine.open(order):
            yield ev

    async def release(self, rid: int, rel: Released, affinity: str = "") -> bool:
        return self.engine.release(rid, rel)

    async def upstream_done(self, rid: int, comp: str, affinity: str = "") -> bool:
        return self.engine.upstream_done(rid, comp)

    async def stats(self) -> dict[str, Any]:
        return self.engine.stats()


class RayTransport:
    """The orchestrator's transport over Serve handles; ``affinity`` keys pin sessions."""

    def __init__(self, handles: dict[str, DeploymentHandle[Any]]) -> None:
        self.handles = handles
        self.streams = {d: h.options(stream=True) for d, h in handles.items()}

    async def open(self, deployment: str, order: OpenOrder) -> AsyncIterator[StageEvent]:
        gen = self.streams[deployment].open.remote(order=order, affinity=f"{deployment}:{order.rid}")
        assert isinstance(gen, DeploymentResponseGenerator)
        async for ev in gen:
            yield ev

    async def release(self, deployment: str, rid: int, rel: Released) -> bool:
        ok: bool = await self.handles[deployment].release.remote(
            rid=rid, rel=rel, affinity=f"{deployment}:{rid}"
        )
        return ok

    async def upstream_done(self, deployment: str, rid: int, comp: str) -> bool:
        ok: bool = await self.handles[deployment].upstream_done.remote(
            rid=rid, comp=comp, affinity=f"{deployment}:{rid}"
        )
        return ok


def _refused(exc: Refused) -> Response:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


class Ingress:
    """HTTP: ``POST /v1/chat/completions``, ``POST /v1/omniplane/requests``, ``GET
    /v1/omniplane/info``, ``GET /v1/omniplane/stats``, ``GET /health``. With API keys, every
    route but ``GET /health`` needs ``Authorization: Bearer <key>`` (401); bodies and prompts
    over the limits get 413 (``deploy/auth.py``). Ray Serve's own ``/-/routes`` is answered by its
    proxy before any application code runs: a middleware in the proxy asks the key there
    (``deploy/proxy_auth.py``); ``/-/healthz`` stays public."""

    def __init__(
        self, plan: ResolvedPlan, options: DeployOptions, handles: dict[str, DeploymentHandle[Any]]
    ) -> None:
        replica_grpc_on_node_address()
        self.model = plan.model
        self.guard = options.guard
        self.transport = RayTransport(handles)
        orch = Orchestrator(
            plan.model, plan.spec, self.transport, seed=options.seed, max_attempts=options.max_attempts
        )
        self.core = IngressCore(
            plan.model, orch, options.clock, max_in_flight=options.max_in_flight, name=plan.model.name,
            deadline_s=options.deadline_s,
        )

    async def __call__(self, request: Request) -> Response:
        path, method = request.url.path.rstrip("/"), request.method
        try:
            self.guard.authorize(method, path, request.headers.get("authorization"))
        except Refused as exc:
            self.core.counts["unauthorized"] += 1
            return _refused(exc)
        if method == "GET":
            if path == "/health":
                return JSONResponse({"status": "ok"})
            if path == "/v1/omniplane/info":
                return JSONResponse(self.core.info())
            if path == "/v1/omniplane/stats":
                return JSONResponse(await self._stats())
        if method == "POST" and path in ("/v1/chat/completions", "/v1/omniplane/requests"):
            return await self._generate(request, chat=path.endswith("completions"))
        return JSONResponse(
            {
                "error": {
                    "message": f"no route {method} {path}",
                    "type": "not_found",
                    "param": None,
                    "code": 404,
                }
            },
            status_code=404,
        )

    async def _generate(self, request: Request, chat: bool) -> Response:
        try:
            raw = await read_body(request, self.guard)
        except Refused as exc:
            self.core.counts["too_large" if exc.status == 413 else "body_timeout"] += 1
            return _refused(exc)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            self.core.counts["bad_request"] += 1
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            return JSONResponse(api.BadRequest("body", f"not valid JSON ({reason})").body(), status_code=400)
        try:
            parsed = api.parse_chat(self.model, body) if chat else api.parse_typed(self.model, body)
            self.guard.check_prompt(api.usage_of(self.model, parsed.type, parsed.work)["prompt_tokens"])
            given = body.get("omniplane") if chat and isinstance(body, dict) else None
            self.guard.check_work(parsed.work, "omniplane.work" if isinstance(given, dict) and "work" in given
                                  else "work")
            run = self.core.admit(parsed)
        except Refused as exc:
            self.core.counts["too_large"] += 1
            return _refused(exc)
        except api.BadRequest as exc:
            self.core.counts["bad_request"] += 1
            return JSONResponse(exc.body(), status_code=400)
        except Overloaded as exc:
            return JSONResponse(exc.body(), status_code=503, headers={"Retry-After": str(exc.retry_after_s)})
        if parsed.stream:
            return StreamingResponse(self.core.stream(run), media_type="text/event-stream")
        done = await unless_disconnected(request, self.core.complete(run))
        if done is None:  # the client left: its run is cancelled, nobody reads this answer
            return Response(status_code=499)
        status, out = done
        return JSONResponse(out, status_code=status)

    async def _stats(self) -> dict[str, Any]:
        return {"ingress": self.core.stats()}


def replica_actor_options(engine: str, tp: int) -> dict[str, Any]:
    """Ray resources (and environment) of one node replica: the emulated engine takes nothing;
    vLLM takes its TP degree in GPUs when the cluster has GPUs and runs its CPU build otherwise.
    (``--engine vllm-omni`` runs no node replicas: cli/deploy_omni.py.)"""
    if engine == "vllm":
        import ray

        from omniplane.deploy.vllm_engine import REPLICA_ENV

        gpus = tp if ray.cluster_resources().get("GPU", 0) > 0 else 0  # type: ignore[no-untyped-call]
        return {"num_cpus": 0, "num_gpus": gpus, "runtime_env": {"env_vars": dict(REPLICA_ENV)}}
    if engine != "emulated":
        raise ValueError(f"no node replicas for engine {engine!r}")
    return {"num_cpus": 0, "num_gpus": 0}


def build_app(plan: ResolvedPlan, options: DeployOptions) -> Any:
    """The Serve application of ``plan`` (bind it with ``serve.run``)."""
    nodes: dict[str, Any] = {}
    for node in plan.spec.nodes:
        for gi, group in enumerate(node.executors):
            name = deployment_name(node.name, gi)
            actor = replica_actor_options(options.engine, group.tp)
            nodes[name] = serve.deployment(
                name=name,
                num_replicas=group.count,
                ray_actor_options=actor,
                max_ongoing_requests=NODE_MAX_ONGOING,
                request_router_config={"request_router_class": ROUTER},
            )(NodeReplica).bind(plan, options, node.name, gi)
    return serve.deployment(
        num_replicas=options.ingress_replicas,
        ray_actor_options={"num_cpus": 0},
        max_ongoing_requests=options.max_in_flight + INGRESS_SLACK,
    )(Ingress).bind(plan, options, nodes)
