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

from tests.cli.proctree import listening, off_loopback, session

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
def deploy(tmp_path: Path) -> Iterator[Callable[[int], subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(port: int) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env["PYTHONPATH"] = str(ROOT / "src")
        with (tmp_path / "deploy.log").open("ab") as log:
            proc = subprocess.Popen([sys.executable, "-c", CLI, "deploy", str(PLAN), "--port", str(port)],
                                    cwd=tmp_path, env=env, stdout=log, stderr=log, start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:  # whatever a failed test left: its session, by process id
        for pid in session(proc.pid):
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
        deploy: Callable[[int], subprocess.Popen[bytes]], tmp_path: Path) -> None:
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
def test_sigterm_during_start_up_leaves_no_process(deploy: Callable[[int], subprocess.Popen[bytes]],
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
