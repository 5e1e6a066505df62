"""vLLM plugin: with ``OMNIPLANE_SHM_POLL_S=S`` in its environment, a busy reader of vLLM's
shared-memory message queues sleeps ``S`` seconds between polls instead of calling
``sched_yield`` in a loop.

Why (docs/decisions/0107-engine-core-renice.md): vLLM's engine core reads every step's result
from its worker through a shared-memory queue (``shm_broadcast.MessageQueue``). For 1 s after each read
its reader polls that queue in a loop that calls ``sched_yield`` (``SpinCondition.wait``; vLLM
0.30 has no setting for it). Under load that loop never sleeps. On a 2-core host where the
worker owns one core, it takes most of the other core from the API server and the load
generator, and the sharing of that core decides the engine's iteration time (measured:
docs/results/fidelity.md).
With ``S > 0`` the reader sleeps between polls inside the same 1 s window, so the engine core
uses only the CPU it needs, and each result is seen at most ``S`` later (plus the wake-up).
Past the window the reader parks on the writer's notification, as in vLLM. The notification
path alone (vLLM's window at 0) was tried and is not used: vLLM's own comment bounds a lost
notification's recovery at its 5 s recheck, and the fixture's iterations then took 0.3-0.8 s.
This setting changes how vLLM's processes *wait* for each other. It does not change what the
engine schedules or computes.

This is an environment setting of the host under test, labelled as one wherever it is used
(``omniplane fidelity --fixture --engine-poll``, stored as ``engine.pinning.shm_poll_s``). It is
off by default, because vLLM loads general plugins in every process and an ordinary server must
not change behaviour. The patch is applied once per process, before the engine creates its
queues (vLLM's engine core and worker load general plugins first); each process that applies it
says so on stderr. With a vLLM that has no ``SpinCondition.wait``, the plugin warns and changes
nothing.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

ENV = "OMNIPLANE_SHM_POLL_S"
MARK = "_omniplane_poll_s"
NOTE = "omniplane: vLLM shared-memory queue readers sleep"


def poll_s(environ: Any = os.environ) -> float | None:
    """The busy reader's sleep between polls from ``environ`` (None: not set, vLLM's own)."""
    raw = environ.get(ENV)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"environment variable {ENV}: expected seconds >= 0, got {raw!r}") from None
    if not value >= 0:
        raise ValueError(f"environment variable {ENV}: expected seconds >= 0, got {raw!r}")
    return value


def patch(cls: Any, seconds: float, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Make every busy reader of ``cls`` sleep ``seconds`` between polls instead of calling
    ``sched_yield`` (idempotent; False: already patched). Past vLLM's busy window the reader
    parks on the writer's notification as before; at 0 nothing changes."""
    if getattr(cls, MARK, None) is not None:
        return False
    original = cls.wait

    def wait(self: Any, timeout_ms: int | None = None) -> None:
        if seconds > 0 and self.is_reader and time.monotonic() <= self.last_read + self.busy_loop_s:
            sleep(seconds)
            return
        original(self, timeout_ms)

    cls.wait = wait
    setattr(cls, MARK, seconds)
    return True


def register() -> None:
    """vLLM's ``vllm.general_plugins`` entry point (pyproject.toml)."""
    seconds = poll_s()
    if seconds is None:
        return
    try:
        from vllm.distributed.device_communicators import shm_broadcast
    except ImportError as exc:
        log.warning("omniplane: %s=%s ignored: vLLM's shm_broadcast does not import (%s)", ENV, seconds, exc)
        return
    cls = getattr(shm_broadcast, "SpinCondition", None)
    if cls is None or not hasattr(cls, "wait"):
        log.warning("omniplane: %s=%s ignored: this vLLM has no shm_broadcast.SpinCondition.wait",
                    ENV, seconds)
        return
    if patch(cls, seconds):  # on stderr, so the server's log says which processes run it
        print(f"{NOTE} {seconds:g} s between polls ({ENV}, pid {os.getpid()})", file=sys.stderr, flush=True)
