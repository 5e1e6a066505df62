"""The plan on a real local Ray Serve cluster (loopback only): HTTP behaviour, a replica killed
under a running request, the load generator CLI, and a short rehearsal with a kill; and the
exported Serve router application in front of stand-in deployments.

One cluster for the module (starting Ray takes tens of seconds on two cores): the router test,
which takes ``/`` while it runs, comes before the module's application is deployed; the
rehearsal, which deploys its own application, runs last.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app as cli
from omniplane.deploy.auth import Guard
from omniplane.deploy.cluster import LOOPBACK, deploy, kill_replica, ray_cluster, replica_actors
from omniplane.deploy.rehearse import RehearsalConfig, rehearse
from omniplane.deploy.serve_app import DeployOptions
from omniplane.spec import ResolvedPlan, ResolvedWorkload, SLOChoice, SoloMultiplierSLO
from tests.deploy.conftest import SMALL_PLAN
from tests.deploy.test_api import TI2A
from tests.deploy.test_gateway_serve import router_args

LIMIT = 4  # the test application's admission limit
SCALE = 0.5  # model seconds run twice as fast as wall time here: the tests wait less

pytestmark = pytest.mark.ray  # one Ray cluster at a time (tests/conftest.py)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    p = _free_port()
    with ray_cluster(port=p):
        yield p


@pytest.fixture(scope="module")
def url(port: int, small_plan: ResolvedPlan) -> str:
    deploy(small_plan, DeployOptions(time_scale=SCALE, max_in_flight=LIMIT))
    return f"http://{LOOPBACK}:{port}"


def _long(rid: str, tokens: int) -> dict[str, Any]:
    work = {**TI2A, "thinker": {"prompt_tokens": 600, "output_tokens": tokens}}
    return {"type": "ti2a", "id": rid, "work": work, "stream": True}


def test_the_local_cluster_is_on_loopback(port: int) -> None:
    import ray

    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {LOOPBACK}
    assert ray.get_runtime_context().gcs_address.startswith(f"{LOOPBACK}:")


class _Stub(BaseHTTPRequestHandler):
    """A stand-in vLLM-Omni server: answers every POST with its name and the body it got."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        out = json.dumps({"stub": self.server.name, "path": self.path,  # type: ignore[attr-defined]
                          "got": json.loads(body)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stubs() -> Iterator[dict[str, str]]:
    servers = {}
    for name in ("d0", "d1"):
        s = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        s.name = name  # type: ignore[attr-defined]
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers[name] = s
    yield {n: f"http://127.0.0.1:{s.server_address[1]}" for n, s in servers.items()}
    for s in servers.values():
        s.shutdown()
        s.server_close()


def test_a_request_goes_through_the_serve_router_to_the_deployment(port: int, tmp_path: Path,
                                                                   stubs: dict[str, str]) -> None:
    """The router application of ``export --target ray-serve`` (test_gateway_serve.py) in front
    of two stand-in deployments. It takes ``/`` until it is deleted, so it runs before ``url``
    deploys the module's application there."""
    from ray import serve

    from omniplane.deploy.gateway_serve import app

    args = router_args(tmp_path)

    @serve.deployment(name="OmniServer", ray_actor_options={"num_cpus": 0})
    class StandIn:  # OmniServer's url(), without vLLM-Omni
        def __init__(self, url: str) -> None:
            self._url = url

        def url(self) -> str:
            return self._url

    try:
        for name, url in stubs.items():
            serve.run(StandIn.bind(url), name=name, route_prefix=None)  # type: ignore[attr-defined]
        serve.run(app(args), name="router", route_prefix="/")
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        r = httpx.post(f"http://{LOOPBACK}:{port}/v1/chat/completions", json=body,
                       headers={"X-Omniplane-Type": "ti2t"}, timeout=60, trust_env=False)
    finally:  # the three go down together (one after another, each waits its replica's grace)
        for name in ("router", *stubs):
            serve.delete(name, _blocking=False)
        for name in ("router", *stubs):
            serve.delete(name)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["stub"] == r.headers["x-omniplane-deployment"] in stubs
    assert got["path"] == "/v1/chat/completions" and got["got"] == body
    assert r.headers["x-omniplane-type"] == "ti2t"


def test_info_and_health(url: str) -> None:
    assert httpx.get(f"{url}/health").json() == {"status": "ok"}
    info = httpx.get(f"{url}/v1/omniplane/info").json()
    assert info["model"] == "qwen3-omni" and info["time_scale"] == SCALE and info["max_in_flight"] == LIMIT
    assert httpx.get(f"{url}/nope").status_code == 404


@pytest.mark.parametrize(
    "path,body,param",
    [
        ("/v1/omniplane/requests", b"{not json", "body"),
        ("/v1/omniplane/requests", b'{"type": "t2x"}', "type"),
        (
            "/v1/omniplane/requests",
            json.dumps({"type": "ti2a", "work": {**TI2A, "code2wav": {}}}).encode(),
            "work.code2wav.audio_seconds",
        ),
        (
            "/v1/chat/completions",
            json.dumps({"messages": [{"role": "user", "content": [{"type": "pdf"}]}]}).encode(),
            "messages[0].content[0].type",
        ),
        (
            "/v1/chat/completions",
            json.dumps({"messages": [{"role": "user", "content": "hi"}], "modalities": "audio"}).encode(),
            "modalities",
        ),
    ],
)
def test_malformed_requests_get_400_naming_the_field(url: str, path: str, body: bytes, param: str) -> None:
    resp = httpx.post(f"{url}{path}", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["param"] == param and param in err["message"]


def test_chat_completion_over_http(url: str) -> None:
    body = {
        "model": "qwen3-omni",
        "modalities": ["text"],
        "max_tokens": 16,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "describe"},
                    {"type": "image_url", "image_url": {"url": "data:"}},
                ],
            }
        ],
    }
    resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
    assert resp.status_code == 200
    out = resp.json()
    assert out["object"] == "chat.completion" and out["omniplane"]["type"] == "ti2t"
    assert 0 < out["omniplane"]["first_response_ms"] <= out["omniplane"]["e2e_ms"]
    assert out["usage"]["completion_tokens"] <= 16


def test_overload_sheds_with_503_and_retry_after(url: str) -> None:
    """A burst of three times the admission limit: the ingress admits up to its limit and
    refuses the rest at once with 503 and a Retry-After in whole seconds; nothing is dropped."""

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=120) as client:
            reqs = [
                client.post(
                    f"{url}/v1/omniplane/requests", json={**_long(f"burst-{i}", 300), "stream": False}
                )
                for i in range(3 * LIMIT)
            ]
            return list(await asyncio.gather(*reqs))

    resps = asyncio.run(burst())
    codes = [r.status_code for r in resps]
    assert set(codes) <= {200, 503}, codes
    assert codes.count(200) >= LIMIT and codes.count(503) >= 1, codes
    for r in resps:
        if r.status_code == 503:
            assert int(r.headers["retry-after"]) >= 1
            assert r.json()["error"]["type"] == "overloaded"
        else:
            assert r.json()["choices"][0]["finish_reason"] == "stop"


def test_a_killed_replica_is_replaced_and_its_request_retried(url: str, small_plan: ResolvedPlan) -> None:
    """Kill the thinker's only replica while a request decodes on it: Ray Serve starts a new
    replica, the ingress re-opens the session there, the request completes."""
    events: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{url}/v1/omniplane/requests", json=_long("kill-1", 1200), timeout=300
    ) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if not line.startswith("data:") or line.endswith("[DONE]"):
                continue
            events.append(json.loads(line[5:]))
            if len(events) == 1:  # the first token is out: the thinker is decoding
                before = replica_actors("front-g0")
                killed = kill_replica(small_plan, "front")
    assert killed in before
    assert "error" not in events[-1] and events[-1]["omniplane"]["event"] == "finished"
    stats = httpx.get(f"{url}/v1/omniplane/stats").json()["ingress"]
    assert stats["session_retries"] >= 1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (now := replica_actors("front-g0")) in ([], before):
        time.sleep(1)
    assert len(now) == 1 and now != before


def test_loadgen_cli_against_the_ingress(url: str) -> None:
    res = CliRunner().invoke(
        cli,
        [
            "loadgen",
            "--url",
            url,
            "--workload",
            "qwen3-omni-servegen",
            "--duration",
            "6",
            "--rate",
            "2",
            "--seed",
            "3",
            "--slo",
            "5x solo p95",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["sent"] >= 4 and out["lost"] == 0 and out["failed"] == 0 and out["unfinished"] == 0
    assert out["completed"] + out["shed"] == out["sent"]
    assert out["time_scale"] == SCALE and out["request_goodput"] is not None
    for m in out["per_type"].values():
        assert m["slo_ms"] > 0 and "p99_ttft_ms" in m


def test_a_keyed_deployment_serves_only_keyed_clients(port: int, small_plan: ResolvedPlan) -> None:
    """Redeployed with an API key and small limits: 401 without the key, 413 over the limits, a
    keyed request completes, and the load generator needs the key (runs after the unkeyed tests)."""
    key = "serve-test-key"
    guard = Guard.with_keys([key], max_body_bytes=8192, max_prompt_tokens=1000)
    deploy(small_plan, DeployOptions(time_scale=SCALE, max_in_flight=LIMIT, guard=guard))
    url = f"http://{LOOPBACK}:{port}"
    auth = {"Authorization": f"Bearer {key}"}
    body = {"type": "ti2a", "work": {**TI2A, "thinker": {"prompt_tokens": 600, "output_tokens": 5}}}
    assert httpx.post(f"{url}/v1/omniplane/requests", json=body, timeout=30).status_code == 401
    assert httpx.get(f"{url}/v1/omniplane/info", timeout=30).status_code == 401
    assert httpx.get(f"{url}/health", timeout=30).status_code == 200
    big = {**body, "pad": "x" * 10_000}
    assert httpx.post(f"{url}/v1/omniplane/requests", json=big, headers=auth, timeout=30).status_code == 413
    long = {**body, "work": {**body["work"], "thinker": {"prompt_tokens": 1001, "output_tokens": 5}}}
    assert httpx.post(f"{url}/v1/omniplane/requests", json=long, headers=auth, timeout=30).status_code == 413
    ok = httpx.post(f"{url}/v1/omniplane/requests", json=body, headers=auth, timeout=120)
    assert ok.status_code == 200 and ok.json()["object"] == "chat.completion"
    args = ["loadgen", "--url", url, "--workload", "qwen3-omni-servegen", "--duration", "2", "--rate", "1",
            "--slo-multiplier", "5", "--json"]
    refused = CliRunner().invoke(cli, args, env={"OMNIPLANE_API_KEY": None})
    assert refused.exit_code == 2 and "401" in refused.stderr and "--api-key" in refused.stderr
    keyed = CliRunner().invoke(cli, args, env={"OMNIPLANE_API_KEY": key})
    assert keyed.exit_code == 0, keyed.output
    out = json.loads(keyed.stdout)
    assert out["failed"] == 0 and out["lost"] == 0 and out["completed"] + out["shed"] == out["sent"]


def test_short_rehearsal_with_a_replica_killed(
    port: int, small_plan: ResolvedPlan, workload: ResolvedWorkload
) -> None:
    """What ``omniplane rehearse`` does, on the module's cluster (it deploys its own app)."""
    cfg = RehearsalConfig(
        duration_s=8.0,
        time_scale=SCALE,  # the same requests and kill, model seconds twice as fast as wall time
        rate=2.0,
        seed=5,
        kill="front",
        kill_at=0.5,
        port=port,
        drain_s=120.0,
        slo=SLOChoice(base=SoloMultiplierSLO(multiplier=5.0)),
    )
    out = rehearse(small_plan, workload, cfg)
    assert out["sent"] >= 8 and out["lost"] == 0 and out["failed"] == 0 and out["unfinished"] == 0
    assert out["completed"] == out["sent"]
    assert out["killed"]["actor"].startswith("SERVE_REPLICA::omniplane#front-g0#")
    assert out["replicas_after"] == {"aud-g0": 1, "front-g0": 1, "back-g0": 1}
    assert out["goodput_simulated"] > 0 and out["goodput_measured"] > 0
    assert set(out["per_type"]) <= set(small_plan.model.type_names)
    assert out["plan"] == "qwen3-omni-3node-test" and str(SMALL_PLAN).endswith("qwen3-omni-3node.yaml")
