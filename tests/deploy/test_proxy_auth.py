"""Ray Serve's own routes (``/-/routes``) need the key too (omniplane.deploy.proxy_auth): the
middleware alone, and on a local Ray Serve whose proxy inherits it."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import httpx
import pytest

from omniplane.deploy.auth import Guard
from omniplane.deploy.proxy_auth import (
    CALLBACK,
    CALLBACK_ENV,
    DIGESTS_ENV,
    LIMITS_ENV,
    ProxyKeys,
    install,
    installed,
    middlewares,
)
from tests.raw_http import endless_headers

KEY = "sk-proxy-test"


async def _inner(scope: Any, receive: Any, send: Any) -> None:
    """Stands for Serve's proxy app: 200 to everything."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"proxy"})


def _codes(app: Any) -> dict[str, int]:
    async def main() -> dict[str, int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://p") as c:
            good, wrong = {"authorization": f"Bearer {KEY}"}, {"authorization": "Bearer nope"}
            return {
                "routes": (await c.get("/-/routes")).status_code,
                "routes_wrong": (await c.get("/-/routes", headers=wrong)).status_code,
                "routes_key": (await c.get("/-/routes", headers=good)).status_code,
                "healthz": (await c.get("/-/healthz")).status_code,
                "app": (await c.post("/v1/chat/completions")).status_code,  # the app checks its own
            }

    return asyncio.run(main())


def test_the_proxy_routes_need_the_key_and_healthz_and_the_apps_pass() -> None:
    guard = Guard.with_keys([KEY])
    assert _codes(ProxyKeys(_inner, guard.key_digests)) == {
        "routes": 401, "routes_wrong": 401, "routes_key": 200, "healthz": 200, "app": 200}
    assert _codes(ProxyKeys(_inner, ())) == {  # no keys: open, as on loopback
        "routes": 200, "routes_wrong": 200, "routes_key": 200, "healthz": 200, "app": 200}


def test_install_puts_digests_never_the_key_in_the_environment() -> None:
    env: dict[str, str] = {}
    install(Guard(), env)
    assert set(env) == {CALLBACK_ENV, LIMITS_ENV}  # no keys: the limits only
    install(Guard.with_keys([KEY, "other"]), env)
    assert env[CALLBACK_ENV] == CALLBACK and KEY not in "".join(env.values())
    assert env[DIGESTS_ENV].split(",") == list(Guard.with_keys([KEY, "other"]).key_digests)
    before = {CALLBACK_ENV: "someone.else:callback"}
    with installed(Guard.with_keys([KEY]), before):
        assert before[CALLBACK_ENV] == CALLBACK and DIGESTS_ENV in before
    assert before == {CALLBACK_ENV: "someone.else:callback"}  # as it was
    install(Guard(), env)
    assert DIGESTS_ENV not in env  # keys from an earlier install do not stay


def test_the_callback_reads_the_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "startup", uvicorn.Server.startup)  # the callback patches it
    monkeypatch.delenv(DIGESTS_ENV, raising=False)
    assert ProxyKeys not in [m.cls for m in middlewares()]
    monkeypatch.setenv(DIGESTS_ENV, ",".join(Guard.with_keys([KEY]).key_digests))
    mw, _ = middlewares()
    assert mw.cls is ProxyKeys and _codes(mw.cls(_inner, *mw.args, **mw.kwargs))["routes"] == 401


@pytest.mark.ray
def test_a_local_ray_serve_asks_the_key_on_its_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray.serve")
    from ray import serve

    from omniplane.deploy.cluster import ray_cluster

    env: dict[str, str] = {}
    install(Guard.with_keys([KEY], max_body_bytes=2**20), env, idle_s=1.0)
    for k, v in env.items():  # before Ray starts: the cluster's processes inherit it
        monkeypatch.setenv(k, v)
    assert KEY not in os.environ.values()

    @serve.deployment(ray_actor_options={"num_cpus": 0})
    class Hello:
        async def __call__(self, request: Any) -> str:
            return "hello"

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with ray_cluster(port=port):
        serve.run(Hello.bind(), name="hello", route_prefix="/hello")  # type: ignore[attr-defined]
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=30, trust_env=False) as c:
            assert c.get(f"{base}/-/routes").status_code == 401
            ok = c.get(f"{base}/-/routes", headers={"authorization": f"Bearer {KEY}"})
            assert ok.status_code == 200 and "/hello" in ok.text
            assert c.get(f"{base}/-/healthz").status_code == 200
            assert c.get(f"{base}/hello").text == "hello"  # the app's own paths pass
            # the proxy refuses a body over the limit, though this app never reads its body
            big = c.post(f"{base}/hello", content=iter([b"a" * 65536] * 32))  # chunked, 2 MiB
            assert big.status_code == 413 and big.headers["connection"] == "close"
            assert c.post(f"{base}/hello", content=iter([b"a" * 65536])).text == "hello"
        with socket.create_connection(("127.0.0.1", port), timeout=30) as half:  # slowloris
            half.sendall(b"POST /hello HTTP/1.1\r\nhost: x\r\n")
            assert half.recv(100) == b""  # closed by the proxy after idle_s
        assert endless_headers(port, "/hello") == b"HTTP/1.1 431"  # headers without end
