"""Who may send work: API keys (401 without, constant-time comparison against every key), body and
prompt limits (413), and `deploy` refusing to bind beyond loopback without a key. The HTTP tests
run the real ingress class over HTTP on 127.0.0.1 (uvicorn, no Ray cluster); test_serve.py
repeats them on a real Ray Serve deployment."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app as cli
from omniplane.deploy import auth
from omniplane.deploy.auth import Guard, Refused, is_loopback
from omniplane.spec import ResolvedPlan
from tests.deploy.conftest import CATALOG_PLAN
from tests.deploy.test_api import TI2A

KEY = "test-key-0123456789"


def test_loopback_addresses() -> None:
    for host in ("127.0.0.1", "127.8.9.10", "localhost", "LOCALHOST", "::1", "[::1]"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "192.168.1.5", "example.com", "128.0.0.1"):
        assert not is_loopback(host), host


def test_no_keys_lets_everything_through() -> None:
    Guard().authorize("POST", "/v1/chat/completions", None)


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer wrong", f"Basic {KEY}", f"bearer{KEY}",
                                    f"Bearer {KEY}x", f"Bearer {KEY[:-1]}"])
def test_wrong_or_missing_key_is_401(header: str | None) -> None:
    guard = Guard.with_keys([KEY, "another-key"])
    with pytest.raises(Refused) as info:
        guard.authorize("POST", "/v1/omniplane/requests", header)
    assert info.value.status == 401 and info.value.headers["WWW-Authenticate"] == "Bearer"


def test_right_key_any_of_several_and_health_open() -> None:
    guard = Guard.with_keys(["first-key", KEY])
    guard.authorize("POST", "/v1/omniplane/requests", f"Bearer {KEY}")
    guard.authorize("GET", "/v1/omniplane/info", f"bearer {KEY}")  # the scheme in any case
    guard.authorize("GET", "/health", None)
    with pytest.raises(Refused):
        guard.authorize("GET", "/v1/omniplane/stats", None)  # stats say too much to be public


def test_keys_are_kept_as_digests_and_all_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = Guard.with_keys([KEY, "k2", "k3"])
    assert KEY not in repr(guard) and all(len(d) == 64 for d in guard.key_digests)
    calls: list[int] = []
    real = auth.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    guard.authorize("GET", "/v1/omniplane/info", f"Bearer {KEY}")  # matches the first key
    assert len(calls) == 3  # still compared against every key: no early exit on a match


def test_limits() -> None:
    guard = Guard(max_body_bytes=100, max_prompt_tokens=10)
    guard.check_length("100")
    guard.check_length(None)
    with pytest.raises(Refused) as info:
        guard.check_length("101")
    assert info.value.status == 413
    with pytest.raises(Refused):
        guard.check_body(101)
    guard.check_prompt(10)
    with pytest.raises(Refused, match="prompt of 11 tokens"):
        guard.check_prompt(11)


# ---- over HTTP on loopback: the ingress class itself, served by uvicorn -------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def keyed_url(catalog_plan: ResolvedPlan) -> Iterator[str]:
    pytest.importorskip("ray")
    uvicorn = pytest.importorskip("uvicorn")
    from starlette.requests import Request

    from omniplane.deploy.serve_app import DeployOptions, Ingress

    guard = Guard.with_keys([KEY], max_body_bytes=4096, max_prompt_tokens=2000)
    ingress = Ingress(catalog_plan, DeployOptions(guard=guard, epoch=time.time()), {})

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        response = await ingress(Request(scope, receive))
        await response(scope, receive, send)

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield url
    server.should_exit = True
    thread.join(timeout=10)


def _post(url: str, body: bytes, key: str | None = KEY) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{url}/v1/omniplane/requests", content=body, headers=headers, timeout=30)


def test_http_401_without_or_with_a_wrong_key(keyed_url: str) -> None:
    for key in (None, "wrong"):
        res = _post(keyed_url, json.dumps({"type": "ti2a", "work": TI2A}).encode(), key)
        assert res.status_code == 401
        assert res.json()["error"]["type"] == "authentication_error"
        assert res.headers["www-authenticate"] == "Bearer"
        assert res.headers["connection"] == "close"  # the body is not read to its end
    assert httpx.get(f"{keyed_url}/v1/omniplane/info").status_code == 401
    assert httpx.get(f"{keyed_url}/v1/omniplane/stats").status_code == 401
    assert httpx.get(f"{keyed_url}/health").json() == {"status": "ok"}


def test_http_with_the_key_reaches_the_ingress(keyed_url: str) -> None:
    info = httpx.get(f"{keyed_url}/v1/omniplane/info", headers={"Authorization": f"Bearer {KEY}"})
    assert info.status_code == 200 and info.json()["model"] == "qwen3-omni"
    bad = _post(keyed_url, b'{"type": "t2x"}')  # through the guard, refused by the API: 400
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "type"


def test_http_413_oversize_body_declared_or_streamed(keyed_url: str) -> None:
    big = json.dumps({"type": "ti2a", "work": TI2A, "pad": "x" * 5000}).encode()
    res = _post(keyed_url, big)
    assert res.status_code == 413 and res.json()["error"]["type"] == "request_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while it streams
        for _ in range(10):
            yield b" " * 1000

    res = httpx.post(f"{keyed_url}/v1/omniplane/requests", content=chunks(),
                     headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert res.status_code == 413
    unauth = _post(keyed_url, big, key=None)
    assert unauth.status_code == 401  # the key is checked before the body is read


def test_http_413_long_prompt(keyed_url: str) -> None:
    work = {**TI2A, "thinker": {**TI2A["thinker"], "prompt_tokens": 2001}}
    res = _post(keyed_url, json.dumps({"type": "ti2a", "work": work}).encode())
    assert res.status_code == 413 and "prompt of 2,001 tokens" in res.json()["error"]["message"]
    chat = {"messages": [{"role": "user", "content": "word " * 1700}]}  # 8,500 chars ~ 2,125 tokens
    res = httpx.post(f"{keyed_url}/v1/chat/completions", json=chat,
                     headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert res.status_code == 413


# ---- deploy's own refusal ------------------------------------------------------------------------
def test_deploy_beyond_loopback_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(auth.API_KEY_ENV, raising=False)
    res = CliRunner().invoke(cli, ["deploy", str(CATALOG_PLAN), "--host", "0.0.0.0"])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: --host 0.0.0.0: binding beyond loopback")
    assert "--api-key" in res.stderr and auth.API_KEY_ENV in res.stderr
    ok = CliRunner().invoke(cli, ["deploy", str(CATALOG_PLAN), "--host", "0.0.0.0", "--dry-run", "--json",
                                  "--deadline-s", "30"], env={auth.API_KEY_ENV: KEY})
    assert ok.exit_code == 0, ok.output
    summary = json.loads(ok.stdout)
    assert summary["api_key"] == "required" and KEY not in ok.stdout
    assert summary["limits"]["deadline_s"] == 30 and summary["limits"]["work"]["tokens"] == 65_536
    bad = CliRunner().invoke(cli, ["deploy", str(CATALOG_PLAN), "--dry-run", "--deadline-s", "0"])
    assert bad.exit_code == 2 and "--deadline-s" in bad.stderr


# ---- the ingress class driven as ASGI directly (no server, no Ray cluster) -----------------------
def _asgi(plan: ResolvedPlan, receive: Any, headers: list[tuple[bytes, bytes]] | None = None,
          path: str = "/v1/omniplane/requests", **limits: Any) -> tuple[int, dict[str, Any]]:
    pytest.importorskip("ray")
    import asyncio

    from starlette.requests import Request

    from omniplane.deploy.serve_app import DeployOptions, Ingress

    ingress = Ingress(plan, DeployOptions(guard=Guard(**limits), epoch=time.time()), {})
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers or [],
             "query_string": b"", "scheme": "http", "server": ("127.0.0.1", 80), "root_path": ""}
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def main() -> None:
        response = await ingress(Request(scope, receive))
        await response(scope, receive, send)

    asyncio.run(asyncio.wait_for(main(), 10))
    return sent[0]["status"], json.loads(sent[1]["body"]) if sent[1]["body"] else {}


def test_asgi_413_names_the_work_field_over_its_limit(catalog_plan: ResolvedPlan) -> None:
    work = {**TI2A, "image_encoder": {"items": 2, "tokens": 1e9}}
    body = json.dumps({"type": "ti2a", "work": work}).encode()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    status, out = _asgi(catalog_plan, receive)
    assert status == 413 and out["error"]["param"] == "work.image_encoder.tokens"
    assert "1,000,000,000 is over the limit of 65,536" in out["error"]["message"]
    for comp, q in (("thinker", "output_tokens"), ("code2wav", "audio_seconds")):
        body = json.dumps({"type": "ti2a", "work": {**TI2A, comp: {**TI2A[comp], q: 1e7}}}).encode()
        status, out = _asgi(catalog_plan, receive)
        assert status == 413 and out["error"]["param"] == f"work.{comp}.{q}"
    parts = [{"type": "text", "text": "hi"}] + [{"type": "image_url"}] * 65  # 65 images: over 64
    chat = {"messages": [{"role": "user", "content": parts}]}
    body = json.dumps(chat).encode()
    status, out = _asgi(catalog_plan, receive, path="/v1/chat/completions")
    assert status == 413 and out["error"]["param"] == "work.image_encoder.items"


def test_asgi_chunked_body_refused_at_the_limit_without_reading_the_rest(catalog_plan: ResolvedPlan) -> None:
    reads: list[int] = []

    async def receive() -> dict[str, Any]:  # an endless chunked body, 1,000 bytes a message
        reads.append(1)
        return {"type": "http.request", "body": b" " * 1000, "more_body": True}

    status, out = _asgi(catalog_plan, receive, max_body_bytes=4096)
    assert status == 413 and out["error"]["type"] == "request_too_large"
    assert len(reads) == 5  # 5,000 bytes: the first read past 4,096, and no more


def test_asgi_incomplete_body_times_out_with_408(catalog_plan: ResolvedPlan) -> None:
    import asyncio

    messages = [{"type": "http.request", "body": b'{"type": ', "more_body": True}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.sleep(3600)  # the client stops sending
        return {"type": "http.disconnect"}

    started = time.monotonic()
    status, out = _asgi(catalog_plan, receive, body_timeout_s=0.2)
    assert status == 408 and out["error"]["type"] == "request_timeout"
    assert time.monotonic() - started < 5


def test_asgi_a_client_leaving_cancels_the_waiting_answer() -> None:
    pytest.importorskip("ray")
    import asyncio

    from starlette.requests import Request

    from omniplane.deploy.serve_app import unless_disconnected

    cancelled: list[bool] = []
    messages = [{"type": "http.disconnect"}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.sleep(3600)
        return {}

    async def forever() -> int:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return 1

    async def main() -> int | None:
        return await unless_disconnected(Request({"type": "http", "headers": []}, receive), forever())

    assert asyncio.run(asyncio.wait_for(main(), 10)) is None and cancelled == [True]


def test_asgi_a_trickled_body_times_out_with_408_like_a_stalled_one(catalog_plan: ResolvedPlan) -> None:
    import asyncio

    async def receive() -> dict[str, Any]:  # one byte every 50 ms, never ending: no pause is long
        await asyncio.sleep(0.05)
        return {"type": "http.request", "body": b" ", "more_body": True}

    status, out = _asgi(catalog_plan, receive, body_timeout_s=0.3)
    assert status == 408 and "within 0.3 s" in out["error"]["message"]
