"""The router (omniplane.deploy.gateway) against stand-in deployments (httpx mock transports):
the routing file, classification, probabilities, byte-for-byte forwarding and relaying, one
retry before the first byte, an error event after it, admission, keys, limits, metrics.
tests/deploy/test_gateway_vllm.py runs it in front of two real vLLM engines."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from scipy.stats import chisquare

from omniplane.deploy.auth import Guard
from omniplane.deploy.gateway import Gateway, GatewayOptions
from omniplane.deploy.routing import Picker, Routing, classify, load_routing, routing_from
from omniplane.errors import InputError
from omniplane.spec import load_model

MODEL = load_model("qwen3-omni")
A, B = "http://a.test:8001", "http://b.test:8002"
ROUTES: dict[str, Any] = {
    "kind": "omniplane-routing", "model": "qwen3-omni", "served_model": "m", "seed": 1,
    "deployments": {"a": {"url": A}, "b": {"url": B + "/v1/"}},
    "types": {"ti2t": [{"deployment": "a", "p": 0.7}, {"deployment": "b", "p": 0.3}],
              "ti2a": [{"deployment": "b", "p": 1.0}]},
    "slo_ms": {"ti2t": 1000},
}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def chat(modalities: list[str] | None = None, stream: bool = False, text: str = "what is this?") -> bytes:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": text}, IMAGE]}], "stream": stream}
    if modalities:
        body["modalities"] = modalities
    return json.dumps(body).encode()


def routing(**changes: Any) -> Routing:
    return routing_from({**ROUTES, **changes}, MODEL, environ={})


Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


class Backends:
    """Stand-in deployments by host: each records the bodies it got and answers via ``handler``."""

    def __init__(self, handlers: dict[str, Handler]) -> None:
        self.handlers = handlers
        self.got: dict[str, list[bytes]] = {h: [] for h in handlers}

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host.split(".")[0]
        self.got[host].append(await request.aread())
        return await self.handlers[host](request)


class Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes], fail: bool = False) -> None:
        self.chunks, self.fail = chunks, fail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            await asyncio.sleep(0)
            yield c
        if self.fail:
            raise httpx.ReadError("peer closed connection")


def respond(status: int, body: dict[str, Any]) -> httpx.Response:
    """An answer as a real transport gives it: headers first, the body streamed after."""
    return httpx.Response(status, headers={"content-type": "application/json"},
                          stream=Chunks([json.dumps(body).encode()]))


async def answer(request: httpx.Request) -> httpx.Response:
    return respond(200, {"id": "cmpl-x", "engine": request.url.host,
                         "rid": request.headers.get("x-request-id")})


async def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def streamer(chunks: list[bytes], fail: bool = False) -> Handler:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Chunks(chunks, fail))

    return handler


def run(gw: Gateway, backends: Backends, calls: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        gw._client = httpx.AsyncClient(transport=httpx.MockTransport(backends))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw), base_url="http://router") as c:
            return await calls(c)

    return asyncio.run(main())


def post(body: bytes, path: str = "/v1/chat/completions", **headers: str) -> Callable[[httpx.AsyncClient],
                                                                                     Awaitable[httpx.Response]]:
    async def call(c: httpx.AsyncClient) -> httpx.Response:
        return await c.post(path, content=body, headers={"content-type": "application/json", **headers})

    return call


# ---- the routing file and classification -----------------------------------------------------
def test_a_routing_file_loads_with_its_catalog_model(tmp_path: Path) -> None:
    f = tmp_path / "routing.yaml"
    f.write_text(json.dumps(ROUTES))
    r = load_routing(f)
    assert r.model.name == "qwen3-omni" and r.deployments == {"a": A, "b": B}  # /v1 and / dropped
    assert r.slo_ms == {"ti2t": 1000} and r.routes["ti2a"][0].url == B


@pytest.mark.parametrize(("change", "names"), [
    ({"types": {"ti2t": [{"deployment": "a", "p": 0.5}]}}, ("types", "sum to 0.5; expected 1")),
    ({"types": {"nope": [{"deployment": "a", "p": 1}]}}, ("types.nope", "no request type")),
    ({"types": {"ti2t": [{"deployment": "c", "p": 1}]}}, ("unknown deployment", "expected one of: a, b")),
    ({"types": {"ti2t": [{"deployment": "a", "p": True}]}}, ("types.ti2t[0].p", "boolean")),
    ({"types": {"ti2t": []}}, ("types.ti2t", "at least one {deployment, p}")),
    ({"types": {"ti2t": [{"deployment": "a", "p": 0.5}, {"deployment": "a", "p": 0.5}]}}, ("listed twice",)),
    ({"deployments": {"a": {"url": "ftp://x"}}}, ("deployments.a.url", "http://")),
    ({"deployments": {"a": {"url": A, "serve_app": "a"}}}, ("deployments.a", "exactly one of url")),
    ({"deployments": {"a": {"url": A, "api_key": "k"}}}, ("deployments.a.api_key",)),
    ({"deployments": {"a": {"url": A, "api_key_env": "A KEY"}}}, ("deployments.a.api_key_env",)),
    ({"slo_ms": {"tv2t": 100}}, ("slo_ms.tv2t", "not a routed type")),
    ({"kind": "routing"}, ("kind", "omniplane-routing")),
])
def test_a_bad_routing_file_names_file_field_and_expectation(tmp_path: Path, change: dict[str, Any],
                                                             names: tuple[str, ...]) -> None:
    f = tmp_path / "routing.yaml"
    doc = {**ROUTES, **change}
    if "deployments" in change:
        doc["deployments"] = {**ROUTES["deployments"], **change["deployments"]}
    if "types" in change:
        doc["types"] = {**ROUTES["types"], **change["types"]}
    f.write_text(json.dumps(doc))
    with pytest.raises(InputError) as info:
        load_routing(f)
    text = str(info.value)
    assert str(f) in text and all(n in text for n in names), text


def test_requests_are_classified_by_their_parts_and_modalities() -> None:
    r = routing()
    assert classify(r, json.loads(chat()), "/v1/chat/completions") == "ti2t"
    assert classify(r, json.loads(chat(["text", "audio"])), "/v1/chat/completions") == "ti2a"
    assert classify(r, json.loads(chat()), "/v1/chat/completions", header="ti2a") == "ti2a"
    with_ext = {**json.loads(chat()), "omniplane": {"type": "ti2a"}}
    assert classify(r, with_ext, "/v1/chat/completions") == "ti2a"
    from omniplane.deploy.api import BadRequest

    with pytest.raises(BadRequest, match="routed types ti2t, ti2a"):
        classify(r, json.loads(chat()), "/v1/chat/completions", header="tiv2t")
    text_only = {"messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(BadRequest, match="takes text and returns text") as info:
        classify(r, text_only, "/v1/chat/completions")
    assert info.value.param == "messages"


def test_draws_follow_the_plans_probabilities_per_type() -> None:
    picker = Picker(routing())
    n = 5000
    got = Counter(picker.first("ti2t").deployment for _ in range(n))
    # chi-square goodness of fit against 0.7/0.3 (1 degree of freedom): p >= 0.001
    assert chisquare([got["a"], got["b"]], [0.7 * n, 0.3 * n]).pvalue > 1e-3
    assert {picker.first("ti2a").deployment for _ in range(100)} == {"b"}
    retry = picker.retry("ti2t", {"a"})
    assert retry is not None and retry.deployment == "b"
    assert picker.retry("ti2a", {"b"}) is None
    assert _draws(50, seed=1) == _draws(50, seed=1) != _draws(50, seed=2)  # seeded


def _draws(n: int, seed: int) -> list[str]:
    p = Picker(routing(seed=seed))
    return [p.first("ti2t").deployment for _ in range(n)]


# ---- forwarding ------------------------------------------------------------------------------
def test_the_body_goes_unchanged_and_the_answer_comes_back_unchanged() -> None:
    body = chat(text="odd  spacing,\u00e9 kept")
    backends = Backends({"a": answer, "b": answer})
    gw = Gateway(routing())
    resp = run(gw, backends, post(body, **{"x-request-id": "client-7"}))
    assert resp.status_code == 200
    engine = resp.headers["x-omniplane-deployment"]
    assert backends.got[engine] == [body] and sum(len(v) for v in backends.got.values()) == 1
    assert resp.json() == {"id": "cmpl-x", "engine": f"{engine}.test", "rid": "client-7"}
    assert resp.headers["x-request-id"] == "client-7" and resp.headers["x-omniplane-type"] == "ti2t"


def test_a_stream_is_relayed_chunk_for_chunk() -> None:
    chunks = [b'data: {"n": 1}\n\n', b'data: {"n": 2}\n\n', b"data: [DONE]\n\n"]
    gw = Gateway(routing())
    resp = run(gw, Backends({"a": streamer(chunks), "b": streamer(chunks)}),
               post(chat(["text", "audio"], stream=True)))
    assert resp.status_code == 200 and resp.content == b"".join(chunks)
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert resp.headers["x-omniplane-deployment"] == "b"


def test_a_deployment_down_before_answering_is_retried_once_on_another() -> None:
    backends = Backends({"a": refuse, "b": answer})
    gw = Gateway(routing())

    async def calls(c: httpx.AsyncClient) -> list[httpx.Response]:
        return [await post(chat())(c) for _ in range(20)]

    answers = run(gw, backends, calls)
    assert [r.status_code for r in answers] == [200] * 20
    assert all(r.headers["x-omniplane-deployment"] == "b" for r in answers)
    firsts = gw.metrics.routed
    assert gw.metrics.retries["ti2t"] == firsts[("ti2t", "a")] > 0  # every draw of a, retried once
    assert len(backends.got["b"]) == 20 and gw.metrics.failures["a"] == firsts[("ti2t", "a")]


def test_when_every_deployment_fails_the_client_gets_one_502_naming_them() -> None:
    backends = Backends({"a": refuse, "b": refuse})
    gw = Gateway(routing())
    resp = run(gw, backends, post(chat()))
    assert resp.status_code == 502
    msg = resp.json()["error"]["message"]
    assert "a: " in msg and "b: " in msg and "connection refused" in msg
    assert sum(len(v) for v in backends.got.values()) == 2  # the first try and one retry
    assert gw.metrics.outcomes[("ti2t", "failed")] == 1 and gw.metrics.in_flight == 0


def test_an_engine_status_is_relayed_and_503_is_retried() -> None:
    async def bad(request: httpx.Request) -> httpx.Response:
        return respond(400, {"error": {"message": "engine says no"}})

    async def busy(request: httpx.Request) -> httpx.Response:
        return respond(503, {"error": {"message": "busy"}})

    resp = run(Gateway(routing()), Backends({"a": bad, "b": bad}), post(chat(["text", "audio"])))
    assert resp.status_code == 400 and resp.json()["error"]["message"] == "engine says no"
    gw = Gateway(routing(types={"ti2t": [{"deployment": "a", "p": 1.0}, {"deployment": "b", "p": 0.0}]}))
    resp = run(gw, Backends({"a": busy, "b": answer}), post(chat()))
    assert resp.status_code == 200 and resp.headers["x-omniplane-deployment"] == "b"


def test_a_stream_cut_after_its_first_bytes_ends_with_an_error_event_not_a_retry() -> None:
    chunks = [b'data: {"n": 1}\n\n', b'data: {"n"']
    backends = Backends({"a": streamer(chunks, fail=True), "b": streamer(chunks, fail=True)})
    gw = Gateway(routing())
    resp = run(gw, backends, post(chat(["text", "audio"], stream=True)))
    assert resp.status_code == 200
    assert resp.content.startswith(b"".join(chunks) + b"\n\n")
    events = [e for e in resp.content[len(b"".join(chunks)):].split(b"\n\n") if e.strip()]
    assert json.loads(events[0].removeprefix(b"data: "))["error"]["type"] == "upstream_error"
    assert events[1] == b"data: [DONE]" and len(events) == 2
    assert len(backends.got["b"]) == 1 and not backends.got["a"]  # not sent twice
    assert gw.metrics.outcomes[("ti2a", "stream_error")] == 1 and gw.metrics.in_flight == 0


# ---- admission, keys, limits, metrics ---------------------------------------------------------
def test_over_max_in_flight_is_503_with_retry_after() -> None:
    release = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return await answer(request)

    gw = Gateway(routing(), GatewayOptions(max_in_flight=1))

    async def calls(c: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        first = asyncio.ensure_future(post(chat())(c))
        while gw.metrics.in_flight == 0:
            await asyncio.sleep(0.01)
        second = await post(chat())(c)
        release.set()
        return await first, second

    first, second = run(gw, Backends({"a": slow, "b": slow}), calls)
    assert first.status_code == 200 and second.status_code == 503
    assert second.headers["retry-after"] == "1" and second.json()["error"]["type"] == "overloaded"


def test_keys_and_limits_are_checked_before_routing() -> None:
    backends = Backends({"a": answer, "b": answer})
    gw = Gateway(routing(), GatewayOptions(guard=Guard.with_keys(["k1"], max_body_bytes=4096,
                                                                 max_prompt_tokens=100)))

    async def calls(c: httpx.AsyncClient) -> list[httpx.Response]:
        return [await post(chat())(c),
                await c.get("/health"),
                await c.get("/metrics"),
                await post(chat(text="x" * 5000), authorization="Bearer k1")(c),
                await post(chat(text="x" * 1000), authorization="Bearer k1")(c),
                await post(b"{not json", authorization="Bearer k1")(c),
                await post(chat(), authorization="Bearer k1")(c)]

    codes = [r.status_code for r in run(gw, backends, calls)]
    assert codes == [401, 200, 401, 413, 413, 400, 200]
    assert sum(len(v) for v in backends.got.values()) == 1


def test_a_body_refused_before_its_end_closes_the_connection() -> None:
    """413 (a declared or a chunked body over the limit) and 408 (a stalled body) leave the rest
    of the body unread: ``Connection: close`` ends it rather than reading it to its end."""
    backends = Backends({"a": answer, "b": answer})
    gw = Gateway(routing(), GatewayOptions(guard=Guard(max_body_bytes=4096, max_prompt_tokens=100,
                                                       body_timeout_s=0.2)))

    async def chunked() -> AsyncIterator[bytes]:
        for _ in range(8):
            yield b"x" * 1024

    async def stalled() -> AsyncIterator[bytes]:
        yield b"{"
        await asyncio.sleep(5)

    async def calls(c: httpx.AsyncClient) -> list[httpx.Response]:
        return [await post(b"x" * 5000)(c),
                await c.post("/v1/chat/completions", content=chunked()),
                await c.post("/v1/chat/completions", content=stalled()),
                await post(chat(text="x" * 1000))(c)]  # read to its end: the prompt is too long

    resps = run(gw, backends, calls)
    assert [r.status_code for r in resps] == [413, 413, 408, 413]
    assert [r.headers.get("connection") for r in resps] == ["close", "close", "close", None]


@pytest.mark.parametrize("key, value", [("max_tokens", 10**12), ("max_tokens", "99999999"),
                                        ("max_tokens", 1e12), ("max_completion_tokens", " 70000 "),
                                        ("max_tokens", 10**400),
                                        ("n", 100_000), ("n", "1000"), ("best_of", 500.0)])
def test_output_tokens_and_choices_over_the_limit_are_413_however_spelled(key: str, value: Any) -> None:
    """vLLM's request models take a numeric string or a whole float as an integer: the router
    counts them as the engine will."""
    backends = Backends({"a": answer, "b": answer})
    gw = Gateway(routing(), GatewayOptions(guard=Guard(max_prompt_tokens=65_536)))
    body = {**json.loads(chat()), key: value}
    (resp,) = run(gw, backends, lambda c: asyncio.gather(post(json.dumps(body).encode())(c)))
    assert resp.status_code == 413 and resp.json()["error"]["param"] == key, resp.text
    assert not any(backends.got.values())  # never forwarded


@pytest.mark.parametrize("key, value", [("max_tokens", "16"), ("max_tokens", 16.0), ("n", 2), ("n", "nan"),
                                        ("max_tokens", None), ("max_tokens", True)])
def test_counts_within_the_limits_or_not_counts_pass_to_the_engine(key: str, value: Any) -> None:
    backends = Backends({"a": answer, "b": answer})
    gw = Gateway(routing(), GatewayOptions(guard=Guard(max_prompt_tokens=65_536)))
    body = {**json.loads(chat()), key: value}
    (resp,) = run(gw, backends, lambda c: asyncio.gather(post(json.dumps(body).encode())(c)))
    assert resp.status_code == 200, resp.text  # the engine judges what is not a count


def test_metrics_count_arrivals_draws_and_attainment_per_type() -> None:
    gw = Gateway(routing())

    async def calls(c: httpx.AsyncClient) -> str:
        for _ in range(10):
            await post(chat())(c)
        await post(chat(["text", "audio"]))(c)
        return (await c.get("/metrics")).text

    text = run(gw, Backends({"a": answer, "b": answer}), calls)
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert lines['omniplane_router_arrivals_total{type="ti2t"}'] == "10"
    assert lines['omniplane_router_arrivals_total{type="ti2a"}'] == "1"
    routed = [k for k in lines if k.startswith('omniplane_router_routed_total{type="ti2t"')]
    assert sum(int(lines[k]) for k in routed) == 10
    assert lines['omniplane_router_first_response_seconds_count{type="ti2t"}'] == "10"
    assert lines['omniplane_router_slo_attainment{type="ti2t"}'] == "1"  # stand-ins answer at once
    assert lines['omniplane_router_slo_target_seconds{type="ti2t"}'] == "1"
    assert 'omniplane_router_slo_attainment{type="ti2a"}' not in lines  # no target for ti2a
    assert lines['omniplane_router_responses_total{type="ti2t",outcome="ok"}'] == "10"
