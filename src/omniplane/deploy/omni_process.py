"""One vLLM-Omni deployment as a child process: ``vllm serve MODEL --omni --deploy-config FILE``
started, waited for until its ``/health`` answers, checked, and stopped with its whole process
group. No Ray here: :mod:`omniplane.deploy.omni_server` wraps it as a Ray Serve deployment.

The deploy document is written to a private temporary folder; the process inherits the caller's
environment (on Ray, ``CUDA_VISIBLE_DEVICES`` is the replica's GPUs, which the document's
``devices`` index into). The ``vllm`` executable is looked up on ``PATH`` (``OMNIPLANE_VLLM``
overrides it, e.g. with a stand-in for tests). With a key (:func:`child_env`), the API server
gets it as ``VLLM_API_KEY`` in its environment and no process gets the variable it came from.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

VLLM_ENV = "OMNIPLANE_VLLM"
STARTUP_TIMEOUT_S = 1800.0  # assumption: a 30B checkpoint loads, compiles and captures within 30 min
STOP_TIMEOUT_S = 10.0


VLLM_KEY = "VLLM_API_KEY"  # vllm serve's key without --api-key (omniplane.deploy.export_omni's docstring)


class OmniProcessError(RuntimeError):
    """The ``vllm serve`` process did not come up, or died."""


def child_env(api_key_env: str | None, *, api: bool,
              environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The environment of a ``vllm serve`` process when the deployment's key is in the variable
    ``api_key_env`` (None: no key, the caller's environment as it is): without that variable, and
    for an API server (``api``) with ``VLLM_API_KEY`` set to the key. :class:`OmniProcessError`
    naming the variable when it is unset or empty."""
    if api_key_env is None:
        return None
    env = dict(os.environ if environ is None else environ)
    key = env.pop(api_key_env, "").strip()
    env.pop(VLLM_KEY, None)
    if not key:
        raise OmniProcessError(f"api_key_env {api_key_env}: the environment variable is unset or empty on "
                               "this node; set it where `ray start` runs on every node (KubeRay: the "
                               "Secret rayservice.yaml names)")
    if api:
        env[VLLM_KEY] = key
    return env


def _port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # what vLLM's own server sets
        try:
            s.bind((host, port))
        except OSError as exc:
            raise OmniProcessError(f"port {port} on {host} is in use ({exc.strerror}): another server "
                                   "holds this deployment's port") from None


class OmniProcess:
    """A ``vllm serve ... --omni`` child process (module docstring)."""

    def __init__(self, model: str, deploy_config: dict[str, Any], *, host: str = "127.0.0.1",
                 port: int | None = 8001, extra_args: list[str] | None = None,
                 log: str | None = None, env: Mapping[str, str] | None = None) -> None:
        """``port`` None: a ``--headless`` stage process (no API server; alive is healthy);
        ``env``: its environment (None: the caller's)."""
        self.model, self.host, self.port = model, host, port
        self.dir = Path(tempfile.mkdtemp(prefix="omniplane-omni-"))
        self.config = self.dir / "deploy.yaml"
        self.config.write_text(yaml.safe_dump(deploy_config, sort_keys=False))
        if port is not None:
            _port_free(host, port)  # else a server already there would pass for this one's /health
        exe = os.environ.get(VLLM_ENV) or shutil.which("vllm")
        if exe is None:
            raise OmniProcessError("no `vllm` executable on PATH: install vllm-omni 0.30 on this node")
        api = ["--host", host, "--port", str(port)] if port is not None else ["--headless"]
        self.argv = [exe, "serve", model, "--omni", "--deploy-config", str(self.config), *api,
                     *(extra_args or [])]
        self.log_path = Path(log) if log else self.dir / "vllm.log"
        self._log = self.log_path.open("ab")
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            self.argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            env=None if env is None else dict(env))

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def healthy(self, timeout: float = 2.0) -> bool:
        if self.port is None:
            return self.proc is not None and self.proc.poll() is None
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=timeout) as r:  # its own URL
                return bool(200 <= r.status < 300)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S, poll: float = 1.0) -> None:
        """Until ``/health`` answers; :class:`OmniProcessError` when the process exits first or the
        time runs out (the process is then stopped)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                self.stop()
                raise OmniProcessError(
                    f"`{' '.join(self.argv)}` exited with {code} before serving:\n{self._tail()}")
            if self.healthy():
                return
            time.sleep(poll)
        self.stop()
        raise OmniProcessError(
            f"`{' '.join(self.argv)}` did not answer {self.url}/health within {timeout:g} s")

    def check(self) -> None:
        """Raise :class:`OmniProcessError` unless the process runs and answers ``/health``."""
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise OmniProcessError(f"vllm serve exited ({code})")
        if self.port is not None and not self.healthy(timeout=5.0):
            raise OmniProcessError(f"vllm serve at {self.url} does not answer /health")

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after ``STOP_TIMEOUT_S``; idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(STOP_TIMEOUT_S)
            except ProcessLookupError:
                pass
        if not self._log.closed:
            self._log.close()
