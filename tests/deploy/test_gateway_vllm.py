"""The router (``omniplane route``) in front of two real vLLM engines (the CPU build in .venv-vllm,
marker ``vllm``) serving the tiny fixture as two deployments (the session's engines, shared with
tests/fidelity/test_live.py: vLLM's scheduler and omniplane's). 200 requests of two types (short
and long token-id prompts; the type in ``X-Omniplane-Type``, both being text -> text), half of
them streamed; one engine is killed (SIGKILL to its process group) after half the answers. Every
request gets exactly one answer: the engine's own (a vLLM completion echoing the request's prompt
ids, with its generated token ids) or a clear error; the first draws before the kill follow the
routing file's probabilities (chi-square); after it, ``b`` is taken out of rotation. ``main()``
prints the figures for docs/results/deploy.md."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

from scipy.stats import chisquare  # noqa: E402

from omniplane.deploy.gateway_health import EJECT_AFTER  # noqa: E402
from omniplane.fidelity.server import ServerSpec, VllmServer, free_port  # noqa: E402
from omniplane.fixture import FIXTURE, ensure_model_dir  # noqa: E402
from omniplane.perf.profiler.run import token_prompt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "src" / "omniplane" / "fidelity" / "data" / "tiny-qwen2.yaml"
SHARES = {"text": {"a": 0.7, "b": 0.3}, "long": {"a": 0.2, "b": 0.8}}
PROMPT = {"text": 16, "long": 128}  # token ids per prompt
MAX_TOKENS = {False: 4, True: 16}  # streamed answers run longer, so the kill catches some mid-stream
N = 200
CONCURRENCY = 8  # assumption: enough to keep both engines busy on a small CPU
KILL_AFTER = N // 2
CLI = "from omniplane.cli.app import main; main()"


def routing_file(path: Path, urls: dict[str, str]) -> Path:
    types = {t: [{"deployment": d, "p": p} for d, p in shares.items()] for t, shares in SHARES.items()}
    path.write_text(json.dumps({"kind": "omniplane-routing", "model": str(TINY), "served_model": "tiny",
                                "deployments": {d: {"url": u} for d, u in urls.items()}, "types": types}))
    return path


def wait_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        assert proc.poll() is None, f"the router exited with {proc.returncode}"
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url}/health")


def request(i: int) -> tuple[str, dict[str, Any]]:
    type_name = "text" if i % 2 == 0 else "long"
    stream = i % 4 >= 2
    prompt = token_prompt(f"r{i}", PROMPT[type_name], FIXTURE.vocab_size)
    return type_name, {"model": FIXTURE.name, "prompt": prompt, "max_tokens": MAX_TOKENS[stream],
                       "temperature": 0, "ignore_eos": True, "return_token_ids": True, "stream": stream}


def read_answer(resp_status: int, content: bytes, body: dict[str, Any]) -> dict[str, Any]:
    """What one answer is: the engine's output (prompt echoed, token ids), or an error."""
    if not body["stream"] or resp_status != 200:
        data = json.loads(content)
        if "error" in data:
            return {"kind": "error", "status": resp_status, "message": data["error"]["message"]}
        choice = data["choices"][0]
        return {"kind": "engine", "prompt": choice["prompt_token_ids"], "tokens": choice["token_ids"],
                "fingerprint": data.get("system_fingerprint"), "done": 0}
    events = [e.removeprefix(b"data: ") for e in content.split(b"\n\n") if e.strip()]
    out: dict[str, Any] = {"kind": "engine", "prompt": None, "tokens": [], "fingerprint": None,
                           "done": events.count(b"[DONE]")}
    for e in events:
        if e == b"[DONE]":
            continue
        data = json.loads(e)
        if "error" in data:
            return {**out, "kind": "error", "status": 200, "message": data["error"]["message"]}
        choice = data["choices"][0]
        out["prompt"] = out["prompt"] or choice.get("prompt_token_ids")
        out["tokens"] += choice["token_ids"]
        out["fingerprint"] = data.get("system_fingerprint") or out["fingerprint"]
    return out


async def load(url: str, victim: VllmServer) -> tuple[list[dict[str, Any]], float, str]:
    sem = asyncio.Semaphore(CONCURRENCY)
    answered = 0
    killed_at = -1.0
    kill_done = asyncio.Event()
    before = ""  # the router's metrics just before the kill

    async def one(c: httpx.AsyncClient, i: int) -> dict[str, Any]:
        nonlocal answered, killed_at, before
        type_name, body = request(i)
        async with sem:
            resp = await c.post(f"{url}/v1/completions", json=body,
                                headers={"X-Omniplane-Type": type_name, "X-Request-Id": f"req-{i}"})
        answered += 1
        if answered == KILL_AFTER and not kill_done.is_set():
            kill_done.set()
            before = (await c.get(f"{url}/metrics")).text
            os.killpg(victim.pgid, signal.SIGKILL)  # the engine's whole process group, by PID
            killed_at = time.monotonic()
        return {"i": i, "type": type_name, "body": body, "rid": resp.headers.get("x-request-id"),
                "deployment": resp.headers.get("x-omniplane-deployment"),
                **read_answer(resp.status_code, resp.content, body)}

    async with httpx.AsyncClient(timeout=120, trust_env=False) as c:
        t0 = time.monotonic()
        out = await asyncio.gather(*(one(c, i) for i in range(N)))
    return list(out), killed_at - t0, before


@pytest.fixture(scope="module")
def engines(live_engines: Any) -> Iterator[dict[str, VllmServer]]:
    """The session's two engines (tests/fidelity/live_engines.py, where tests/fidelity/test_live.py
    reads them first): vLLM's own scheduler as ``a``, omniplane's scheduler class as ``b``, the
    one killed; both are stopped after this module (a later test that asks starts them again)."""
    servers = live_engines.get()
    try:
        yield {"a": servers["bare"], "b": servers["horizon"]}
    finally:
        live_engines.stop()


def run_trial(engines: dict[str, VllmServer], tmp: Path) -> dict[str, Any]:
    routes = routing_file(tmp / "routing.json", {d: s.url for d, s in engines.items()})
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-c", CLI, "route", str(routes), "--port", str(port)]
    with (tmp / "router.log").open("wb") as log:
        router = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, stderr=log)
    try:
        wait_health(url, router)
        answers, killed_at_s, before = asyncio.run(load(url, engines["b"]))
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        # the same prompts straight to the surviving engine: greedy decoding gives the same tokens
        survivor = engines["a"].url
        direct = {}
        with httpx.Client(timeout=120, trust_env=False) as c:
            for a in answers:
                if a["kind"] == "engine":
                    body = {**a["body"], "stream": False}
                    got = c.post(f"{survivor}/v1/completions", json=body).json()
                    direct[a["i"]] = got["choices"][0]["token_ids"]
        router.send_signal(signal.SIGTERM)
        t = time.monotonic()
        rc = router.wait(timeout=30)
        stop_s = time.monotonic() - t
    finally:
        if router.poll() is None:
            router.kill()
            router.wait()
    return {"answers": answers, "routed": routed_of(metrics), "routed_before_kill": routed_of(before),
            "direct": direct, "rc": rc, "stop_s": stop_s, "killed_at_s": killed_at_s, "metrics": metrics}


def routed_of(metrics: str) -> dict[str, Counter[str]]:
    """The router's first draws per type and deployment, from its /metrics text."""
    routed: dict[str, Counter[str]] = {t: Counter() for t in SHARES}
    for line in metrics.splitlines():
        if line.startswith("omniplane_router_routed_total{"):
            labels = dict(kv.split("=") for kv in line[line.index("{") + 1:line.index("}")].split(","))
            routed[labels["type"].strip('"')][labels["deployment"].strip('"')] = int(line.rsplit(" ", 1)[1])
    return routed


def summary(trial: dict[str, Any]) -> dict[str, Any]:
    answers = trial["answers"]
    kinds = Counter(a["kind"] for a in answers)
    same = sum(trial["direct"][a["i"]] == a["tokens"] for a in answers if a["kind"] == "engine")
    out: dict[str, Any] = {"requests": N, "answered": len(answers), "engine_output": kinds["engine"],
                           "errors": kinds["error"],
                           "stream_errors": sum(a["kind"] == "error" and a["status"] == 200 for a in answers),
                           "lost": N - len({a["i"] for a in answers}),
                           "duplicated": len(answers) - len({a["rid"] for a in answers}),
                           "same_tokens_as_direct": same, "killed_after_s": round(trial["killed_at_s"], 1),
                           "router_stop_s": round(trial["stop_s"], 2), "router_rc": trial["rc"]}
    for line in trial["metrics"].splitlines():  # retries and failures the router counted
        for name in ("retries_total", "deployment_failures_total", "deployment_ejections_total"):
            if line.startswith(f"omniplane_router_{name}{{"):
                label = line[line.index('"') + 1:line.rindex('"')]
                out[f"{name.removesuffix('_total')}_{label}"] = int(float(line.rsplit(" ", 1)[1]))
    for t, shares in SHARES.items():  # the draws while both deployments were up
        got = [trial["routed_before_kill"][t][d] for d in shares]
        n = sum(got)
        out[f"routed_{t}"] = dict(zip(shares, got, strict=True))
        out[f"routed_after_kill_{t}"] = {d: trial["routed"][t][d] - trial["routed_before_kill"][t][d]
                                         for d in shares}
        out[f"chi2_p_{t}"] = float(chisquare(got, [shares[d] * n for d in shares]).pvalue)
    return out


def test_the_router_in_front_of_two_real_engines_answers_every_request_once(
        engines: dict[str, VllmServer], tmp_path: Path) -> None:
    trial = run_trial(engines, tmp_path)
    s = summary(trial)
    answers = trial["answers"]
    assert s["answered"] == N and s["lost"] == 0 and s["duplicated"] == 0, s
    assert sorted(a["rid"] for a in answers) == sorted(f"req-{i}" for i in range(N))
    for a in answers:
        if a["kind"] == "engine":  # the engine's own output for this very request, once
            assert a["prompt"] == a["body"]["prompt"] and len(a["tokens"]) == a["body"]["max_tokens"], a
            assert str(a["fingerprint"]).startswith("vllm-") and a["done"] == int(a["body"]["stream"]), a
        else:  # a clear error naming the deployment that failed
            assert "b" in a["message"] and ("failed" in a["message"] or "answered" in a["message"]), a
    assert s["engine_output"] >= N // 2  # everything before the kill, and the retried rest
    assert sum(a["deployment"] == "b" for a in answers[KILL_AFTER + 2 * CONCURRENCY:]) == 0
    # the plan's draws before the kill: chi-square goodness of fit per type (1 dof), p >= 0.001
    assert sum(sum(c.values()) for c in trial["routed"].values()) == N
    assert sum(sum(c.values()) for c in trial["routed_before_kill"].values()) >= KILL_AFTER
    assert s["chi2_p_text"] > 1e-3 and s["chi2_p_long"] > 1e-3, s
    # after it, b is ejected: drawn only until its failures reach the threshold (those in flight
    # at the kill fail too, and count), then never again in this trial
    assert s["deployment_ejections_b"] == 1 and s["deployment_failures_b"] <= EJECT_AFTER + CONCURRENCY, s
    after = [s[f"routed_after_kill_{t}"] for t in SHARES]
    assert sum(d["b"] for d in after) <= EJECT_AFTER + CONCURRENCY < sum(d["a"] for d in after), s
    # the answers are vLLM's greedy output: the surviving engine gives the same tokens
    assert s["same_tokens_as_direct"] >= 0.95 * s["engine_output"], s
    assert s["router_rc"] == 143 and s["router_stop_s"] < 10, s  # stopped by SIGTERM (128 + 15)


def main() -> None:
    """``python tests/deploy/test_gateway_vllm.py``: run the trial once and print its figures."""
    import tempfile

    logs = Path(tempfile.mkdtemp(prefix="router-vllm-"))
    model = str(ensure_model_dir())
    servers = {d: VllmServer(ServerSpec(model, served_name=FIXTURE.name, log=logs / f"vllm-{d}.log"))
               for d in ("a", "b")}
    try:
        t0 = time.monotonic()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda s: s.start(), servers.values()))
        print(f"engines up in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        t1 = time.monotonic()
        s = summary(run_trial(servers, logs))
        s["trial_s"] = round(time.monotonic() - t1, 1)
        print(json.dumps(s, indent=2))
    finally:
        for srv in servers.values():
            srv.stop()


if __name__ == "__main__":
    main()
