"""A failed deployment is taken out of rotation and probed back (omniplane.deploy.gateway_health),
and a deployment's own key reaches it, against stand-in OpenAI servers on 127.0.0.1 that can be
killed and restarted, or require a key."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniplane.deploy.auth import Guard
from omniplane.deploy.gateway import Gateway, GatewayOptions
from omniplane.deploy.gateway_health import Health, HealthOptions
from omniplane.deploy.routing import Routing, load_routing, routing_from
from omniplane.spec import load_model
from omniplane.spec.errors import SpecError

MODEL = load_model("qwen3-omni")
FAST = HealthOptions(eject_after=2, base_s=0.2, max_s=1.0, probe_interval_s=0.05, probe_timeout_s=1.0)
WAIT_S = 20.0  # bound on waiting for a probe to restore a deployment (it takes ~0.2 s)
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
CHAT = json.dumps({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                                                             IMAGE]}]})


class Engine:
    """A stand-in deployment: answers chat completions with its name, ``/health`` with 200
    (or ``health_status``); ``kill`` closes its port, ``start`` opens it again."""

    def __init__(self, name: str, port: int = 0, key: str | None = None) -> None:
        self.name, self.port, self.got, self.key = name, port, Counter[str](), key
        self.auth: list[str | None] = []  # the Authorization header of each POST
        self.health_status = 200
        self.server: ThreadingHTTPServer | None = None
        self.start()

    def start(self) -> None:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                engine.got[self.path] += 1
                self._send(engine.health_status, {})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                engine.got[self.path] += 1
                engine.auth.append(self.headers.get("authorization"))
                if engine.key is not None and self.headers.get("authorization") != f"Bearer {engine.key}":
                    self._send(401, {"error": {"message": "invalid key"}})  # as vLLM's --api-key
                    return
                self._send(200, {"engine": engine.name})

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kill(self) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()
        self.server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def engines() -> Iterator[dict[str, Engine]]:
    es = {"a": Engine("a"), "b": Engine("b")}
    yield es
    for e in es.values():
        if e.server is not None:
            e.kill()


def routing(es: dict[str, Engine]) -> Routing:
    a, b = es["a"].url, es["b"].url
    return routing_from({"kind": "omniplane-routing", "model": "qwen3-omni", "served_model": "m", "seed": 3,
                         "deployments": {"a": {"url": a}, "b": {"url": b}},
                         "types": {"ti2t": [{"deployment": "a", "p": 0.7}, {"deployment": "b", "p": 0.3}],
                                   "ti2a": [{"deployment": "b", "p": 1.0}]}}, MODEL, environ={})


def run(gw: Gateway, calls: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw), base_url="http://r") as c:
                return await calls(c)
        finally:
            await gw.aclose()

    return asyncio.run(main())


async def chat(c: httpx.AsyncClient, modalities: list[str] | None = None) -> httpx.Response:
    body = CHAT if modalities is None else json.dumps({**json.loads(CHAT), "modalities": modalities})
    return await c.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})


async def until_up(gw: Gateway, deployment: str) -> None:
    async with asyncio.timeout(WAIT_S):
        while not gw.health.up(deployment):
            await asyncio.sleep(0.02)


def metric(text: str, name: str) -> str:
    return dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))[name]


def test_a_killed_deployment_is_ejected_then_probed_back(engines: dict[str, Engine]) -> None:
    gw = Gateway(routing(engines), GatewayOptions(health=FAST))

    async def calls(c: httpx.AsyncClient) -> None:
        engines["a"].kill()
        answers = [await chat(c) for _ in range(30)]
        assert [r.status_code for r in answers] == [200] * 30  # each retried on b
        assert {r.json()["engine"] for r in answers} == {"b"}
        # a was tried until it reached the threshold, then no more
        assert gw.metrics.failures["a"] == FAST.eject_after and gw.health.ejections["a"] == 1
        text = (await c.get("/metrics")).text
        assert metric(text, 'omniplane_router_deployment_up{deployment="a"}') == "0"
        assert metric(text, 'omniplane_router_deployment_up{deployment="b"}') == "1"
        assert metric(text, 'omniplane_router_deployment_ejections_total{deployment="a"}') == "1"
        engines["a"].start()  # back on its port
        await until_up(gw, "a")
        assert engines["a"].got["/health"] >= 1
        again = [(await chat(c)).json()["engine"] for _ in range(30)]
        assert "a" in again and engines["a"].got["/v1/chat/completions"] == again.count("a")
        assert metric((await c.get("/metrics")).text, 'omniplane_router_deployment_up{deployment="a"}') == "1"

    run(gw, calls)


def test_while_ejected_its_types_draw_among_the_rest_and_a_type_with_none_gets_503(
        engines: dict[str, Engine]) -> None:
    gw = Gateway(routing(engines), GatewayOptions(health=FAST))

    async def calls(c: httpx.AsyncClient) -> None:
        engines["b"].kill()
        engines["b"].health_status = 503  # when it comes back, it is still loading
        first = [await chat(c, ["text", "audio"]) for _ in range(FAST.eject_after)]
        assert [r.status_code for r in first] == [502] * FAST.eject_after  # b alone serves ti2a
        shed = await chat(c, ["text", "audio"])
        assert shed.status_code == 503 and int(shed.headers["retry-after"]) >= 1
        assert "ti2a" in shed.json()["error"]["message"] and "(b)" in shed.json()["error"]["message"]
        assert gw.metrics.outcomes[("ti2a", "unavailable")] == 1
        ti2t = [await chat(c) for _ in range(20)]  # b's share of ti2t goes to a
        assert {r.json()["engine"] for r in ti2t} == {"a"} and gw.metrics.failures["b"] == FAST.eject_after
        engines["b"].start()
        async with asyncio.timeout(WAIT_S):
            while engines["b"].got["/health"] < 3:
                await asyncio.sleep(0.02)
        assert not gw.health.up("b")  # /health 503: kept out
        engines["b"].health_status = 200
        await until_up(gw, "b")
        assert (await chat(c, ["text", "audio"])).json()["engine"] == "b"

    run(gw, calls)


def test_ejections_back_off_exponentially_until_a_good_answer() -> None:
    h = Health(["a"], HealthOptions(eject_after=2, base_s=10, max_s=35))
    assert not h.failed("a", 0.0) and h.up("a")
    assert h.failed("a", 0.0) and not h.up("a") and h.probe_at("a") == 10.0
    assert h.retry_after(["a"], 2.5) == 8
    h.restored("a")
    assert h.up("a") and not h.failed("a", 100.0)  # the count started over
    assert h.failed("a", 100.0) and h.probe_at("a") == 120.0  # twice as long
    h.restored("a")
    h.failed("a", 200.0)
    h.failed("a", 200.0)
    assert h.probe_at("a") == 235.0  # capped at max_s
    h.restored("a")
    h.good("a")
    h.failed("a", 300.0)
    h.failed("a", 300.0)
    assert h.probe_at("a") == 310.0 and h.ejections["a"] == 4


def test_bad_health_options_are_refused() -> None:
    with pytest.raises(ValueError, match="eject_after"):
        HealthOptions(eject_after=0)
    with pytest.raises(ValueError, match="base_s"):
        HealthOptions(base_s=0)
    with pytest.raises(ValueError, match=r"max_s: expected at least base_s \(10\), got 5"):
        HealthOptions(base_s=10, max_s=5)


def test_each_deployment_gets_its_own_key_from_the_environment_and_never_the_clients(
        tmp_path: Path) -> None:
    a, b = Engine("a", key="sk-upstream-a"), Engine("b")
    try:
        doc = {"kind": "omniplane-routing", "model": "qwen3-omni", "served_model": "m",
               "deployments": {"a": {"url": a.url, "api_key_env": "OMNI_KEY_A"}, "b": {"url": b.url}},
               "types": {"ti2t": [{"deployment": "a", "p": 0.5}, {"deployment": "b", "p": 0.5}]}}
        f = tmp_path / "routing.yaml"
        f.write_text(json.dumps(doc))
        assert "sk-upstream-a" not in f.read_text()
        with pytest.raises(SpecError) as err:  # the variable is not set
            load_routing(f, environ={})
        assert str(f) in str(err.value) and "deployments.a.api_key_env" in str(err.value)
        assert "OMNI_KEY_A is unset or empty" in str(err.value)
        r = load_routing(f, environ={"OMNI_KEY_A": "sk-upstream-a"})
        assert "sk-upstream-a" not in repr(r)
        guard = Guard.with_keys(["client-key"])
        gw = Gateway(r, GatewayOptions(guard=guard, health=FAST))

        async def calls(c: httpx.AsyncClient) -> list[httpx.Response]:
            return [await c.post("/v1/chat/completions", content=CHAT, headers={
                "content-type": "application/json", "authorization": "Bearer client-key"}) for _ in range(20)]

        answers = run(gw, calls)
        assert [x.status_code for x in answers] == [200] * 20
        assert {x.json()["engine"] for x in answers} == {"a", "b"}
        assert a.auth and set(a.auth) == {"Bearer sk-upstream-a"}  # a's key, to a only
        assert b.auth and set(b.auth) == {None}  # no key for b; the client's key goes nowhere
        wrong = load_routing(f, environ={"OMNI_KEY_A": "sk-wrong"})  # a refuses: relayed, not hidden
        codes = run(Gateway(wrong, GatewayOptions(health=FAST)), lambda c: _statuses(c, 20))
        assert 401 in codes and 200 in codes
    finally:
        a.kill()
        b.kill()


async def _statuses(c: httpx.AsyncClient, n: int) -> list[int]:
    return [(await chat(c)).status_code for _ in range(n)]
