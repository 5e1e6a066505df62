"""``omniplane route`` as a user runs it: a bad routing file or a port in use is a clear error
before anything listens, beyond loopback it needs a key, it listens on 127.0.0.1 only, and
SIGTERM stops it (143) leaving nothing behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.proctree import listening, off_loopback, session

pytest.importorskip("uvicorn")
ROOT = Path(__file__).resolve().parents[2]
CLI = "from omniplane.cli.app import main; main()"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
IMAGE_CHAT = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                                        {"type": "image_url", "image_url": {"url": "x"}}]}]}
ROUTES = {"kind": "omniplane-routing", "model": "qwen3-omni", "served_model": "m",
          "deployments": {"a": {"url": "http://127.0.0.1:9"}},
          "types": {"ti2t": [{"deployment": "a", "p": 1.0}]}}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CLI, "route", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=ENV)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_bad_routing_file_a_busy_port_and_an_open_host_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "routing.yaml"
    bad.write_text(json.dumps({**ROUTES, "types": {"ti2t": [{"deployment": "a", "p": 0.4}]}}))
    done = run(str(bad), cwd=tmp_path)
    assert done.returncode == 2 and "routing.yaml" in done.stderr and "types.ti2t" in done.stderr, done.stderr
    keyed = tmp_path / "keyed.yaml"  # a deployment's key variable that is not set
    keyed.write_text(json.dumps({**ROUTES, "deployments": {"a": {"url": "http://127.0.0.1:9",
                                                                 "api_key_env": "OMNI_UNSET_KEY_X"}}}))
    done = run(str(keyed), cwd=tmp_path)
    assert done.returncode == 2 and "deployments.a.api_key_env" in done.stderr, done.stderr
    assert "OMNI_UNSET_KEY_X is unset or empty" in done.stderr, done.stderr
    good = tmp_path / "ok.yaml"
    good.write_text(json.dumps(ROUTES))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run(str(good), "--port", str(port), cwd=tmp_path)
    assert done.returncode == 2 and f"--port {port}" in done.stderr and "already in use" in done.stderr
    done = run(str(good), "--host", "0.0.0.0", cwd=tmp_path)
    assert done.returncode == 2 and "--api-key" in done.stderr


def test_route_listens_on_loopback_and_sigterm_stops_it(tmp_path: Path) -> None:
    routes = tmp_path / "routing.yaml"
    routes.write_text(json.dumps(ROUTES))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-c", CLI, "route", str(routes), "--port", str(port)],
                            cwd=tmp_path, env=ENV, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            assert proc.poll() is None
            try:
                if httpx.get(f"{url}/health", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        sockets = listening(session(proc.pid))
        assert [s[3] for s in sockets] == [port] and off_loopback(sockets) == []
        # a deployment that is not there: one clear 502 naming it
        resp = httpx.post(f"{url}/v1/chat/completions", trust_env=False, timeout=30, json=IMAGE_CHAT)
        assert resp.status_code == 502 and "a: " in resp.json()["error"]["message"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 143
        assert not session(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _metric(url: str, name: str) -> str:
    text = httpx.get(f"{url}/metrics", timeout=10, trust_env=False).text
    return dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))[name]


def test_ejection_settings_are_options_and_a_non_default_threshold_is_honoured(tmp_path: Path) -> None:
    routes = tmp_path / "routing.yaml"
    dead = free_port()  # nothing listens there: every try is refused
    routes.write_text(json.dumps({**ROUTES, "deployments": {"a": {"url": f"http://127.0.0.1:{dead}"}}}))
    for bad, says in ((["--eject-after", "0"], "--eject-after"),
                      (["--probe-interval-s", "0"], "--probe-interval-s"),
                      (["--eject-base-s", "10", "--eject-max-s", "5"], "below --eject-base-s 10")):
        done = run(str(routes), *bad, cwd=tmp_path)
        assert done.returncode == 2 and says in done.stderr, done.stderr
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-c", CLI, "route", str(routes), "--port", str(port),
                             "--eject-after", "5", "--eject-base-s", "600", "--eject-max-s", "600"],
                            cwd=tmp_path, env=ENV, stderr=subprocess.DEVNULL, start_new_session=True)
    up = 'omniplane_router_deployment_up{deployment="a"}'
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            assert proc.poll() is None
            try:
                if httpx.get(f"{url}/health", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        codes = []
        for i in range(6):
            codes.append(httpx.post(f"{url}/v1/chat/completions", trust_env=False, timeout=30,
                                    json=IMAGE_CHAT).status_code)
            # in rotation through the 4th failure (the default, 3, would have ejected it at the 3rd)
            assert _metric(url, up) == ("1" if i < 4 else "0"), (i, codes)
        assert codes == [502] * 5 + [503]  # the 6th finds no deployment in rotation for its type
        assert _metric(url, 'omniplane_router_deployment_ejections_total{deployment="a"}') == "1"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
