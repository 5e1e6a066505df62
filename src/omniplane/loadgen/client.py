"""Replay requests against an omniplane ingress (or any OpenAI-compatible endpoint) with
asyncio, open loop: each request is sent at its arrival time whatever the server is doing.

APIs: ``typed`` (``/v1/omniplane/requests``, the ingress's own), ``chat``
(``/v1/chat/completions``) and ``completions`` (``/v1/completions`` with a token-id prompt of the
request's ``prompt_tokens`` and ``max_tokens`` = its ``output_tokens``, ``ignore_eos``: a plain
vLLM server, e.g. the tiny fixture without a tokenizer; optional ``priority`` per type, which
carries the request class to omniplane's scheduler class inside vLLM).

Arrival times and measured latencies are in model seconds: wall time divided by the
deployment's time scale (``GET /v1/omniplane/info`` tells it; 1 for a real deployment).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from omniplane.errors import InputError
from omniplane.loadgen.metrics import COMPLETED, FAILED, LOST, SHED, UNFINISHED, Record
from omniplane.perf.profiler.run import token_prompt
from omniplane.workload import Request

TYPED_PATH, CHAT_PATH, COMPLETIONS_PATH = "/v1/omniplane/requests", "/v1/chat/completions", "/v1/completions"
APIS = ("typed", "chat", "completions")
LEAD_S = 0.5  # wall seconds between setting up and the first arrival
PART = {
    "image": {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}},
    "video": {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,"}},
    "audio": {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
}


@dataclass(frozen=True)
class LoadOptions:
    url: str
    time_scale: float = 1.0
    api: str = "typed"  # typed (/v1/omniplane/requests) or chat (/v1/chat/completions)
    drain_s: float = 30.0  # model seconds after the last arrival; then unanswered requests are unfinished
    run_id: str = ""  # prefix of request ids (idempotency keys); distinct per run
    model: str = ""
    inputs: dict[str, list[str]] | None = None  # chat API: type -> input modalities
    outputs: dict[str, str] | None = None  # chat API: type -> output modality
    api_key: str | None = field(default=None, repr=False)  # sent as Authorization: Bearer
    component: str = ""  # completions API: the LLM whose prompt/output sizes make the request
    vocab: int = 0  # completions API: vocabulary size for the token-id prompts
    priorities: dict[str, int] | None = None  # completions API: type -> vLLM request priority

    @property
    def headers(self) -> dict[str, str]:
        return auth_headers(self.api_key)


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def fetch_info(url: str, timeout_s: float = 10.0, api_key: str | None = None) -> dict[str, Any]:
    """The ingress's ``/v1/omniplane/info`` (model, plan, gpu, time_scale); {} if it has none."""
    try:
        resp = httpx.get(f"{url.rstrip('/')}/v1/omniplane/info", timeout=timeout_s,
                         headers=auth_headers(api_key))
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise InputError(f"{url}: nothing answers there ({exc}); is the server running?") from None
    except httpx.TimeoutException:
        raise InputError(f"{url}: the server took the connection but sent no answer to "
                         f"/v1/omniplane/info within {timeout_s:g} s; is it an omniplane ingress or "
                         "an OpenAI-compatible server, and is it overloaded?") from None
    except httpx.HTTPError:
        return {}
    if resp.status_code == 401:
        given = " (the one given was refused)" if api_key else ""
        raise InputError(f"{url}: the server answered 401 Unauthorized: give its API key "
                         f"(--api-key or OMNIPLANE_API_KEY){given}")
    if resp.status_code != 200:
        return {}
    try:
        data = resp.json()
    except ValueError:  # the body is not echoed: it may be anything
        kind = resp.headers.get("content-type", "no content type")
        raise InputError(f"{url}: /v1/omniplane/info answered with {len(resp.content):,} bytes that "
                         f"are not JSON ({kind!r}); is this an omniplane ingress?") from None
    return data if isinstance(data, dict) else {}


def _body(req: Request, opts: LoadOptions) -> tuple[str, dict[str, Any]]:
    rid = f"{opts.run_id}{req.id}"
    if opts.api == "completions":
        comp = opts.component or next(iter(req.work))
        w = req.work[comp]
        body: dict[str, Any] = {
            "model": opts.model,
            "prompt": token_prompt(rid, int(w["prompt_tokens"]), opts.vocab),
            "max_tokens": int(w["output_tokens"]),
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if opts.priorities and req.type in opts.priorities:
            body["priority"] = opts.priorities[req.type]
        return COMPLETIONS_PATH, body
    work = {c: dict(q) for c, q in req.work.items()}
    if opts.api == "typed":
        return TYPED_PATH, {"id": rid, "type": req.type, "work": work, "stream": True}
    ins = (opts.inputs or {}).get(req.type, ["text"])
    parts: list[dict[str, Any]] = [{"type": "text", "text": "emulated prompt"}]
    parts += [PART[m] for m in ins if m in PART]
    out = (opts.outputs or {}).get(req.type, "text")
    return CHAT_PATH, {
        "model": opts.model,
        "messages": [{"role": "user", "content": parts}],
        "modalities": ["text", "audio"] if out == "audio" else [out],
        "stream": True,
        "stream_options": {"include_usage": True},
        "omniplane": {"id": rid, "type": req.type, "work": work},
    }


def encoded(req: Request, opts: LoadOptions) -> tuple[str, bytes]:
    """The request's path and JSON body as bytes, built before the run starts so that sending
    costs the event loop nothing but the write (a 1,024-token prompt is ~1 ms of Python)."""
    path, body = _body(req, opts)
    return path, json.dumps(body, separators=(",", ":")).encode()


async def _one(client: httpx.AsyncClient, req: Request, opts: LoadOptions, t0: float,
               sent: tuple[str, bytes]) -> Record:
    scale = opts.time_scale

    def now() -> float:
        return (time.monotonic() - t0) / scale

    start = now()
    path, content = sent

    def rec(status: str, **kw: Any) -> Record:
        return Record(req.id, req.type, req.arrival, start, status, **kw)

    text = audio = first = server_first = finished = None
    tokens = chunks = 0
    completions = opts.api == "completions"
    try:
        async with client.stream("POST", f"{opts.url.rstrip('/')}{path}", content=content,
                                 headers={"Content-Type": "application/json"}) as resp:
            if resp.status_code != 200:
                detail = (await resp.aread()).decode(errors="replace")[:300]
                if resp.status_code == 503 and "retry-after" in resp.headers:
                    return rec(
                        SHED,
                        end=now(),
                        http_status=503,
                        retry_after_s=float(resp.headers["retry-after"]),
                        error=detail,
                    )
                return rec(FAILED, end=now(), http_status=resp.status_code, error=detail)
            async for line in resp.aiter_lines():
                if not line.startswith("data:") or (data := line[5:].strip()) == "[DONE]":
                    continue
                t = now()
                chunk = json.loads(data)
                if "error" in chunk:
                    return rec(FAILED, end=t, http_status=200, error=str(chunk["error"])[:300])
                meta = chunk.get("omniplane") or {}
                choice = (chunk.get("choices") or [{}])[0] or {}
                delta = choice.get("delta") or {}
                if chunk.get("choices") and (completions or delta.get("content")):
                    chunks += 1  # a completions chunk carries one token, whatever its text
                    text = t if text is None else text
                if delta.get("audio") and audio is None:
                    audio = t
                if meta.get("first_response") and first is None:
                    first = t
                    server_first = float(meta.get("t_ms", 0.0)) / 1e3
                usage = chunk.get("usage") or {}
                if "completion_tokens" in usage:
                    tokens = int(usage["completion_tokens"])
                if finished is None and (meta.get("event") == "finished" or choice.get("finish_reason")):
                    finished = t  # vLLM sends the usage in a chunk of its own after this one
                    if not completions and tokens:
                        break
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        if finished is None:
            return rec(LOST, error=f"{type(exc).__name__}: {exc}"[:300])
    if finished is None:
        return rec(LOST, error="the stream ended without its final chunk")
    return rec(
        COMPLETED,
        end=finished,
        text_first=text,
        audio_first=audio,
        first_response=first if first is not None else (audio or text or finished),
        server_first_response=server_first,
        output_tokens=tokens or chunks,
        http_status=200,
    )


async def replay(
    requests: Sequence[Request], opts: LoadOptions, transport: httpx.AsyncBaseTransport | None = None
) -> list[Record]:
    """Send every request at its arrival time; wait for answers until ``drain_s`` (model
    seconds) after the last arrival; requests without an answer by then (or not yet sent) are
    unfinished: the run ended before they did, which says nothing of the server losing them."""
    if not requests:
        return []
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival)
    bodies = {i: encoded(requests[i], opts) for i in order}
    tasks: dict[int, asyncio.Task[Record]] = {}
    async with httpx.AsyncClient(timeout=httpx.Timeout(None), limits=limits, transport=transport,
                                 headers=opts.headers) as client:
        t0 = time.monotonic() + LEAD_S
        horizon = t0 + (max(r.arrival for r in requests) + opts.drain_s) * opts.time_scale

        async def dispatch() -> None:
            # one sender, in arrival order: after a stall of the process the overdue requests go
            # out at once, in order, each stamped with its own actual send time (Record.start)
            for i in order:
                delay = t0 + requests[i].arrival * opts.time_scale - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks[i] = asyncio.create_task(_one(client, requests[i], opts, t0, bodies[i]))

        sender = asyncio.create_task(dispatch())
        await asyncio.wait([sender], timeout=max(0.0, horizon - time.monotonic()))
        sender.cancel()
        pending: set[asyncio.Task[Record]] = set()
        if tasks:
            _, pending = await asyncio.wait(tasks.values(), timeout=max(0.0, horizon - time.monotonic()))
        for late in pending:
            late.cancel()
        out = []
        for i, r in enumerate(requests):
            task = tasks.get(i)
            if task is not None and task.done() and not task.cancelled() and task.exception() is None:
                out.append(task.result())
            elif task is None or task in pending:
                why = "not sent before the deadline" if task is None else "no answer before the deadline"
                out.append(Record(r.id, r.type, r.arrival, r.arrival, UNFINISHED, error=why))
            else:
                out.append(Record(r.id, r.type, r.arrival, r.arrival, LOST,
                                  error=f"client error: {task.exception()}"))
        return out
