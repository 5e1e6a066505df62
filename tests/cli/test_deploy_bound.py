"""``omniplane deploy`` on loopback, as a user runs it (a process in a session of its own, the
emulated engine, a local Ray cluster): nothing it or any process it starts listens beyond
127.0.0.1 / ::1 (read from /proc: every TCP listener of the session's processes), SIGTERM while
serving and during start-up leaves no process within 10 s, and a port in use is a ``--port``
error before Ray starts. Slow: each test starts a Ray cluster (tens of seconds)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.proctree import alive, listening, off_loopback, session, tree

pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "tests" / "deploy" / "qwen3-omni-3node.yaml"
CLI = "from omniplane.cli.app import main; main()"
STOP_S = 10.0
START_S = 600.0  # assumption: a local cluster and 4 replicas on 2 busy cores start within 10 minutes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def deploy(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(port: int, plan: Path = PLAN, *args: str, **env_extra: str) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(PYTHONPATH=str(ROOT / "src"), **env_extra)
        with (tmp_path / "deploy.log").open("ab") as log:
            argv = [sys.executable, "-c", CLI, "deploy", str(plan), "--port", str(port), *args]
            proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=log, stderr=log,
                                    start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:  # whatever a failed test left: its session and tree, by process id
        for pid in session(proc.pid) | tree(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


def stop(proc: subprocess.Popen[bytes]) -> tuple[int | None, set[int]]:
    """SIGTERM; the exit status and the session's processes left after STOP_S."""
    proc.send_signal(signal.SIGTERM)
    end = time.monotonic() + STOP_S
    while time.monotonic() < end:
        if proc.poll() is not None and not session(proc.pid):
            break
        time.sleep(0.1)
    return proc.poll(), session(proc.pid)


def wait_for(ready: Callable[[], bool], proc: subprocess.Popen[bytes], what: str) -> None:
    end = time.monotonic() + START_S
    while time.monotonic() < end:
        assert proc.poll() is None, f"deploy exited with {proc.returncode} before {what}"
        if ready():
            return
        time.sleep(0.2)
    raise TimeoutError(what)


def commands(pids: set[int]) -> set[str]:
    out = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            out.add(Path(f"/proc/{pid}/comm").read_text().strip())
    return out


def test_a_loopback_deploy_listens_on_loopback_only_and_sigterm_leaves_nothing(
        deploy: Callable[..., subprocess.Popen[bytes]], tmp_path: Path) -> None:
    port = free_port()
    proc = deploy(port)

    def serving() -> bool:  # answering, and the command has said so (start-up is over)
        if b"serving at" not in (tmp_path / "deploy.log").read_bytes():
            return False
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(serving, proc, "serving")
    sockets = listening(session(proc.pid))
    assert any(p == port for *_, p in sockets)  # the reading sees the proxy's port
    assert {"raylet", "gcs_server"} <= commands(session(proc.pid))  # and Ray's processes
    assert off_loopback(sockets) == []  # pid, command, address, port of any listener beyond loopback
    rc, left = stop(proc)
    assert rc == 0 and not left, (rc, commands(left))  # while serving, SIGTERM means "stop serving"


@pytest.mark.parametrize("phase", ["raylet", "ray::ServeRepli"])
def test_sigterm_during_start_up_leaves_no_process(deploy: Callable[..., subprocess.Popen[bytes]],
                                                   phase: str) -> None:
    """While Ray starts (its raylet is up) and while Serve starts the replicas."""
    proc = deploy(free_port())
    wait_for(lambda: phase in commands(session(proc.pid)), proc, phase)
    rc, left = stop(proc)
    assert rc is not None and not left, (rc, commands(left))


def test_a_port_in_use_is_a_port_error_before_ray_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        done = subprocess.run([sys.executable, "-c", CLI, "deploy", str(PLAN), "--port", str(port)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"--port {port}" in done.stderr and "already in use" in done.stderr, done.stderr


OMNI_PLAN = ROOT / "tests" / "deploy" / "qwen2.5-omni-1dep.yaml"  # one vLLM-Omni deployment, 2 GPUs
STAND_IN = """\
import hashlib, http.server, json, os, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
host = args[args.index("--host") + 1]
open(os.path.join(os.environ["STAND_IN_DIR"], f"{port}.json"), "w").write(json.dumps([os.getpid(), args]))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        said = "stand-in on %d got %s" % (port, hashlib.sha256(body).hexdigest())
        out = json.dumps({"object": "chat.completion", "choices": [{"index": 0, "message": {
            "role": "assistant", "content": said}}]})
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out.encode())
    def log_message(self, *a): pass
http.server.HTTPServer((host, port), H).serve_forever()
"""


def test_vllm_omni_deploy_runs_the_runtimes_own_server_behind_the_router(
        deploy: Callable[..., subprocess.Popen[bytes]], tmp_path: Path) -> None:
    """``--engine vllm-omni``: the export's Serve applications on a local cluster; the replica
    starts ``vllm serve MODEL --omni --deploy-config`` (a stand-in ``vllm``: no GPU here) and the
    router forwards a keyed request's body unchanged and its answer unchanged; listeners stay on
    loopback and SIGTERM leaves nothing (the stand-in included)."""
    import hashlib
    import json

    exe = tmp_path / "vllm"
    exe.write_text(f"#!{sys.executable}\n{STAND_IN}")
    exe.chmod(0o755)
    seen = tmp_path / "seen"
    seen.mkdir()
    port = free_port()
    proc = deploy(port, OMNI_PLAN, "--engine", "vllm-omni", "--num-gpus", "2", "--api-key", "k-1",
                  "--config-dir", str(tmp_path / "files"), OMNIPLANE_VLLM=str(exe), STAND_IN_DIR=str(seen))
    wait_for(lambda: b"serving at" in (tmp_path / "deploy.log").read_bytes(), proc, "serving")
    [argv_file] = list(seen.iterdir())
    pid, argv = json.loads(argv_file.read_text())
    cfg = tmp_path / "files" / "d0.yaml"
    assert argv[:3] == ["serve", "Qwen/Qwen2.5-Omni-7B", "--omni"] and "--deploy-config" in argv, argv
    assert cfg.is_file() and (tmp_path / "files" / "serve-config.yaml").is_file()
    body = json.dumps({"model": "Qwen/Qwen2.5-Omni-7B", "messages": [{"role": "user", "content": "hi"}]})
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    head = {"Content-Type": "application/json"}
    assert httpx.post(url, content=body, headers=head, timeout=30, trust_env=False).status_code == 401
    res = httpx.post(url, content=body, headers={**head, "Authorization": "Bearer k-1"}, timeout=30,
                     trust_env=False)
    assert res.status_code == 200, res.text
    got = res.json()["choices"][0]["message"]["content"]
    assert got == f"stand-in on {argv_file.stem} got {hashlib.sha256(body.encode()).hexdigest()}"
    sockets = listening(session(proc.pid) | tree(proc.pid))  # vllm runs in a session of its own
    assert any(p == int(argv_file.stem) for *_, p in sockets)  # the stand-in is in the reading
    assert off_loopback(sockets) == []
    rc, left = stop(proc)
    assert rc == 0 and not left and not alive(pid), (rc, commands(left))
