"""The router: an OpenAI-compatible front end that sends each request, unchanged, to the
deployment the plan routes its request type to, and relays the engine's answer unchanged.

``POST /v1/chat/completions`` and ``POST /v1/completions`` (text, image, audio and video content
parts, ``modalities``, ``stream``) are classified into a request type
(:func:`omniplane.deploy.routing.classify`), a deployment is drawn with the routing file's
probabilities for that type (:class:`omniplane.deploy.routing.Picker`), and the request body is
forwarded byte for byte to that deployment's endpoint (same path). The engine's status, body and
content type come back as they are; a streamed answer is relayed chunk by chunk as it arrives.

Every request is answered exactly once:

* a deployment that fails before any byte of its answer (refused or dropped connection, 502,
  503 or 504) is tried once more on another deployment serving the type (drawn by the others'
  probabilities); if that fails too, the client gets HTTP 502 naming both;
* a deployment that fails after the first bytes were relayed ends the stream with an error
  event (``data: {"error": {...}}`` then ``data: [DONE]``); nothing is sent twice;
* a client that leaves has its forward cancelled;
* on SIGINT/SIGTERM (:meth:`Gateway.stop_soon`) an open stream ends with an error event and a
  request still waiting on its deployment gets HTTP 503, at once rather than cut at the grace.

A deployment that keeps failing is taken out of rotation and probed back
(:mod:`omniplane.deploy.gateway_health`): meanwhile its types are drawn among their other
deployments, probabilities renormalised; a type with none left gets HTTP 503 with
``Retry-After`` naming it.

A deployment's own key (the routing file's ``api_key_env``) goes to it as ``Authorization:
Bearer``; the client's key is checked here and not forwarded. Before routing: API keys, body and
prompt limits, body timeout (:class:`omniplane.deploy.auth.Guard`),
then admission (over ``max_in_flight``: HTTP 503 with ``Retry-After``). Every answer carries
``X-Request-Id`` (the client's, else a new one; also sent to the engine), ``X-Omniplane-Type``
and ``X-Omniplane-Deployment``. ``GET /health`` (public) and ``GET /metrics`` (Prometheus text,
:mod:`omniplane.deploy.gateway_metrics`). No Ray: Starlette in front, httpx behind.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from omniplane.deploy import api
from omniplane.deploy.asgi import read_body, unless_disconnected
from omniplane.deploy.auth import Guard, Refused
from omniplane.deploy.gateway_health import HEALTH_PATH, Health, HealthOptions
from omniplane.deploy.gateway_metrics import RouterMetrics
from omniplane.deploy.ingress import REQUEST_DEADLINE_S
from omniplane.deploy.routing import TYPE_HEADER, Picker, Route, Routing, classify

PATHS = ("/v1/chat/completions", "/v1/completions")
RETRYABLE = frozenset({502, 503, 504})  # a deployment that cannot take the request now
MAX_ATTEMPTS = 2  # the first deployment and one retry on another
CONNECT_TIMEOUT_S = 5.0  # assumption: a deployment on the same network accepts a connection in 5 s
MAX_CHOICES = 128  # assumption: choices per request (n, best_of), OpenAI's own limit on n
MAX_RESPONSE_BYTES = 256 * 2**20  # assumption: a non-streamed answer (minutes of base64 audio) fits
HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer",
                 "upgrade", "proxy-authenticate", "proxy-authorization"})
T = TypeVar("T")
_RID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class _Failed(Exception):
    """A deployment failed before any byte of its answer was relayed."""


class _Stopping(Exception):
    """The router got SIGINT/SIGTERM while this request waited on its deployment."""


@dataclass(frozen=True)
class GatewayOptions:
    """Admission, limits and timing of the router."""

    max_in_flight: int = 1024  # assumption: requests admitted before shedding with 503
    guard: Guard = field(default_factory=Guard)
    deadline_s: float = REQUEST_DEADLINE_S
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    retry_after_s: int = 1  # what a 503 says in Retry-After
    health: HealthOptions = field(default_factory=HealthOptions)


def _error(status: int, kind: str, message: str, headers: dict[str, str] | None = None,
           param: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}},
                        status_code=status, headers=headers)


def _sse_error(message: str, kind: str, code: int, tail: bytes) -> bytes:
    body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})
    sep = b"" if not tail or tail.endswith(b"\n\n") else b"\n\n"  # never inside a cut event
    return sep + f"data: {body}\n\ndata: [DONE]\n\n".encode()


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt's length as the limits count it: token ids as given, text at 4 characters per
    token (``api.CHARS_PER_TOKEN``), over the prompt and every message's text."""

    def text(n: int) -> int:
        return -(-n // api.CHARS_PER_TOKEN)

    total = 0
    prompt = body.get("prompt")
    items = prompt if isinstance(prompt, list) else [prompt]
    for p in items:
        if isinstance(p, str):
            total += text(len(p))
        elif isinstance(p, int):
            total += 1
        elif isinstance(p, list):
            total += len(p)
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        parts = [content] if isinstance(content, str) else content if isinstance(content, list) else []
        for part in parts:
            if isinstance(part, str):
                total += text(len(part))
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                total += text(len(part["text"]))
    return total


class _Slot:
    """One admitted request's place in ``in_flight``: given back once, however the request ends."""

    def __init__(self, gw: Gateway, type_name: str) -> None:
        self.gw, self.type, self.open = gw, type_name, True
        gw.metrics.in_flight += 1

    def close(self, outcome: str) -> None:
        if self.open:
            self.open = False
            self.gw.metrics.in_flight -= 1
            self.gw.metrics.outcomes[(self.type, outcome)] += 1


class Gateway:
    """The router as an ASGI application (``uvicorn.run(Gateway(...))``)."""

    def __init__(self, routing: Routing, options: GatewayOptions | None = None,
                 client: httpx.AsyncClient | None = None) -> None:
        self.routing = routing
        self.options = options or GatewayOptions()
        self.picker = Picker(routing)
        slo = routing.slo_ms
        targets = {t: (slo[t] / 1e3 if t in slo else None) for t in routing.routes}
        self.metrics = RouterMetrics(list(routing.routes), targets, list(routing.deployments))
        self.health = Health(list(routing.deployments), self.options.health)
        self.metrics.health = self.health
        self._probes: dict[str, asyncio.Task[None]] = {}
        self._client = client
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._waiting: set[asyncio.Task[Any]] = set()  # requests now awaiting their deployment
        self._watch: Callable[[], Awaitable[None]] | None = None
        self._watching: asyncio.Task[None] | None = None

    def watch(self, job: Callable[[], Awaitable[None]]) -> None:
        """A background job run from start-up to shutdown (``route``: closing idle connections)."""
        self._watch = job

    def stop_soon(self) -> None:
        """From any thread (a signal handler): every request waiting on a deployment ends now, a
        stream with an error event, one not yet answered with 503, instead of at uvicorn's grace."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop)

    def _stop(self) -> None:
        self._stopping = True
        for task in list(self._waiting):
            task.cancel()

    async def _await(self, work: Awaitable[T]) -> T:
        """``await work``, raising :class:`_Stopping` instead when :meth:`stop_soon` is called."""
        task = asyncio.current_task()
        if self._stopping or task is None:
            raise _Stopping
        self._waiting.add(task)
        try:
            return await work
        except asyncio.CancelledError:
            if not self._stopping or task.cancelling() != 1:
                raise
            task.uncancel()
            raise _Stopping from None
        finally:
            self._waiting.discard(task)

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            o = self.options
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(o.deadline_s, connect=o.connect_timeout_s),
                limits=httpx.Limits(max_connections=o.max_in_flight * MAX_ATTEMPTS,
                                    max_keepalive_connections=64),
                trust_env=False)
        return self._client

    async def aclose(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
        for task in self._probes.values():
            task.cancel()
        if self._client is not None:
            await self._client.aclose()

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            self._loop = asyncio.get_running_loop()
            if self._watch is not None:
                self._watching = asyncio.ensure_future(self._watch())
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await self.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        response = await self.handle(request)
        try:
            await response(scope, receive, send)
        finally:  # a stream cut while its send was blocked (a client not reading) is left suspended:
            close = getattr(getattr(response, "body_iterator", None), "aclose", None)
            if close is not None:  # so _relay gives its slot back and closes the deployment's stream
                await asyncio.shield(close())

    async def handle(self, request: Request) -> Response:
        path, method = request.url.path.rstrip("/") or "/", request.method
        given = request.headers.get("x-request-id", "")
        rid = given if _RID.match(given) else f"omni-{uuid.uuid4().hex}"
        ids = {"X-Request-Id": rid}
        try:
            self.options.guard.authorize(method, path, request.headers.get("authorization"))
        except Refused as exc:
            return JSONResponse(exc.body(), status_code=exc.status, headers={**exc.headers, **ids})
        if method == "GET" and path == "/health":
            return JSONResponse({"status": "ok"})
        if method == "GET" and path == "/metrics":
            return PlainTextResponse(self.metrics.render(), media_type="text/plain; version=0.0.4")
        if method != "POST" or path not in PATHS:
            return _error(404, "not_found", f"no route {method} {path} (the router serves "
                                            f"POST {' and POST '.join(PATHS)}, GET /health, GET /metrics)")
        return await self._generate(request, path, rid)

    async def _generate(self, request: Request, path: str, rid: str) -> Response:
        arrival = time.monotonic()
        ids = {"X-Request-Id": rid}
        m = self.metrics
        try:
            raw = await read_body(request, self.options.guard)
        except Refused as exc:  # the rest of the body is never read: the connection ends with this
            m.outcomes[("", "refused")] += 1
            return JSONResponse(exc.body(), status_code=exc.status,
                                headers={**exc.headers, **ids, "Connection": "close"})
        try:
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
                reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                raise api.BadRequest("body", f"not valid JSON ({reason})") from None
            type_name = classify(self.routing, body, path, request.headers.get(TYPE_HEADER))
            self._check_limits(body)
        except Refused as exc:
            m.outcomes[("", "refused")] += 1
            return JSONResponse(exc.body(), status_code=exc.status, headers={**exc.headers, **ids})
        except api.BadRequest as exc:
            m.outcomes[("", "refused")] += 1
            return JSONResponse(exc.body(), status_code=400, headers=ids)
        m.arrivals[type_name] += 1
        ids["X-Omniplane-Type"] = type_name
        if m.in_flight >= self.options.max_in_flight:
            m.outcomes[(type_name, "shed")] += 1
            return _error(503, "overloaded", f"{m.in_flight} requests in flight: the router is at its "
                          f"limit; retry after {self.options.retry_after_s} s",
                          {"Retry-After": str(self.options.retry_after_s), **ids})
        slot = _Slot(self, type_name)
        try:
            done = await self._await(unless_disconnected(
                request, self._forward(path, raw, type_name, rid, arrival, slot, ids)))
        except _Stopping:
            slot.close("cancelled")
            return _error(503, "unavailable", "the router is stopping; retry on another router",
                          headers=ids)
        except TimeoutError:
            slot.close("timeout")
            return _error(504, "timeout", f"no deployment answered within {self.options.deadline_s:g} s",
                          headers=ids)
        except BaseException:
            slot.close("cancelled")
            raise
        if done is None:  # the client left: its forward is cancelled, nobody reads this answer
            slot.close("cancelled")
            return Response(status_code=499)
        return done

    def _check_limits(self, body: dict[str, Any]) -> None:
        """The prompt, the output tokens and the choices a request asks for, as the engine will
        read them: vLLM's request models (pydantic, lax) take ``"99999999"`` and ``1e12`` as
        integers too."""
        guard = self.options.guard
        guard.check_prompt(prompt_tokens(body))
        for key, limit, unit in (("max_completion_tokens", guard.max_prompt_tokens, "tokens"),
                                 ("max_tokens", guard.max_prompt_tokens, "tokens"),
                                 ("n", MAX_CHOICES, "choices"), ("best_of", MAX_CHOICES, "choices")):
            v = _count(body.get(key))
            if v is not None and v > limit:
                raise Refused(413, "request_too_large", f"{key} of {v:,.0f} {unit} is over the limit "
                              f"of {limit:,}", param=key)

    async def _forward(self, path: str, raw: bytes, type_name: str, rid: str, arrival: float,
                       slot: _Slot, ids: dict[str, str]) -> Response:
        m = self.metrics
        route = self.picker.pick(type_name, self.health.down())
        if route is None:
            slot.close("unavailable")
            names = [r.deployment for r in self.routing.routes[type_name]]
            wait = self.health.retry_after(names, time.monotonic())
            return _error(503, "unavailable", f"every deployment serving {type_name} ({', '.join(names)}) "
                          f"is out of rotation after failing; retry after {wait} s",
                          {"Retry-After": str(wait), **ids})
        m.routed[(type_name, route.deployment)] += 1
        tried: list[str] = []
        why: list[str] = []
        async with asyncio.timeout(self.options.deadline_s):
            while route is not None and len(tried) < MAX_ATTEMPTS:
                if tried:
                    m.retries[type_name] += 1
                tried.append(route.deployment)
                m.forwarded[(type_name, route.deployment)] += 1
                try:
                    return await self._try(route, path, raw, type_name, rid, arrival, slot, ids)
                except _Failed as exc:
                    self._failed(route.deployment)
                    why.append(f"{route.deployment}: {exc}")
                route = self.picker.pick(type_name, set(tried) | self.health.down())
        slot.close("failed")
        return _error(502, "upstream_error", f"no deployment serving {type_name} answered ("
                      + "; ".join(why) + ")", headers=ids)

    async def _try(self, route: Route, path: str, raw: bytes, type_name: str, rid: str, arrival: float,
                   slot: _Slot, ids: dict[str, str]) -> Response:
        """One deployment's answer, or :class:`_Failed` when it fails before its first byte."""
        headers = {"content-type": "application/json", "x-request-id": rid, **self._auth(route.deployment)}
        req = self.client.build_request("POST", route.url + path, content=raw, headers=headers)
        try:
            resp = await self.client.send(req, stream=True)
        except httpx.HTTPError as exc:
            raise _Failed(_why(exc)) from None
        try:
            if resp.status_code in RETRYABLE:
                raise _Failed(f"HTTP {resp.status_code}")
            chunks = resp.aiter_raw()
            try:
                first = await anext(chunks)
            except StopAsyncIteration:
                first = b""
            if resp.status_code < 300:
                self.metrics.first_response(type_name, time.monotonic() - arrival)
            if resp.status_code >= 500:  # relayed, but counts against the deployment
                self._failed(route.deployment)
            else:
                self.health.good(route.deployment)
            out = {k: v for k, v in resp.headers.items() if k.lower() not in HOP | {"x-request-id"}}
            out.update({**ids, "X-Omniplane-Deployment": route.deployment})
            outcome = "ok" if resp.status_code < 300 else "engine_status"
            if not resp.headers.get("content-type", "").startswith("text/event-stream"):
                data = bytearray(first)
                async for c in chunks:  # not streamed: whole before anything is relayed
                    data += c
                    if len(data) > MAX_RESPONSE_BYTES:
                        raise _Failed(f"answer over {MAX_RESPONSE_BYTES:,} bytes")
                await resp.aclose()
                slot.close(outcome)
                return Response(bytes(data), status_code=resp.status_code, headers=out)
        except httpx.HTTPError as exc:
            await resp.aclose()
            raise _Failed(_why(exc)) from None
        except BaseException:
            await resp.aclose()
            raise
        return StreamingResponse(self._relay(first, chunks, resp, route, arrival, slot, outcome),
                                 status_code=resp.status_code, headers=out)

    async def _relay(self, first: bytes, chunks: AsyncIterator[bytes], resp: httpx.Response, route: Route,
                     arrival: float, slot: _Slot, outcome: str) -> AsyncIterator[bytes]:
        """The engine's stream as it arrives; once bytes went out, a failure ends it with an error
        event (nothing is retried or sent twice)."""
        tail = first
        try:
            if first:
                yield first
            try:
                async with asyncio.timeout_at(_loop_time(arrival + self.options.deadline_s)):
                    while True:
                        try:
                            c = await self._await(anext(chunks))
                        except StopAsyncIteration:
                            break
                        if c:
                            tail = c
                            yield c
            except _Stopping:
                slot.close("cancelled")
                yield _sse_error("the router is stopping; the answer is incomplete", "unavailable", 503, tail)
            except TimeoutError:
                slot.close("timeout")
                yield _sse_error(f"past the deadline of {self.options.deadline_s:g} s", "timeout", 504, tail)
            except httpx.HTTPError as exc:
                self._failed(route.deployment)
                slot.close("stream_error")
                yield _sse_error(f"deployment {route.deployment} failed mid-answer ({_why(exc)}); the "
                                 "answer is incomplete", "upstream_error", 502, tail)
            slot.close(outcome)
        finally:
            slot.close("cancelled")  # no-op unless the client left mid-stream
            await resp.aclose()

    def _auth(self, deployment: str) -> dict[str, str]:
        """The deployment's own key (its ``api_key_env``); the client's key is never forwarded."""
        key = self.routing.keys.get(deployment)
        return {"authorization": f"Bearer {key}"} if key else {}

    def _failed(self, deployment: str) -> None:
        """Counts a failure; when it ejects the deployment, starts probing it."""
        self.metrics.failures[deployment] += 1
        if self.health.failed(deployment, time.monotonic()):
            task = self._probes.get(deployment)
            if task is None or task.done():
                self._probes[deployment] = asyncio.ensure_future(self._probe(deployment))

    async def _probe(self, deployment: str) -> None:
        """After the cool-down, ``GET /health`` until it answers 200, then back in rotation."""
        o, url = self.options.health, self.routing.deployments[deployment]
        while (at := self.health.probe_at(deployment)) is not None:
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            try:
                resp = await self.client.get(url + HEALTH_PATH, timeout=o.probe_timeout_s,
                                             headers=self._auth(deployment))
                if resp.status_code == 200:
                    self.health.restored(deployment)
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(o.probe_interval_s)


def _count(v: Any) -> float | None:
    """A request's number as an engine parses it (an int, a float, or a string of one); None
    for anything else, which the engine refuses itself."""
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        return None
    if isinstance(v, int):
        return float(v) if abs(v) < 10**300 else float("inf")
    try:
        n = float(v)
    except (ValueError, OverflowError):
        return None
    return n if n == n else None  # NaN: not a count


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


def _loop_time(monotonic_deadline: float) -> float:
    """A ``time.monotonic()`` deadline on the running loop's clock (``asyncio.timeout_at``)."""
    return asyncio.get_running_loop().time() + (monotonic_deadline - time.monotonic())
