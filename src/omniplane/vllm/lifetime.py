"""vLLM plugin: with ``OMNIPLANE_EXIT_WITH_PARENT=1`` in its environment, every vLLM process
(engine core, workers) exits when the process that started it is gone.

vLLM's engine-core process does not watch its parent: a Ray Serve replica hosting ``AsyncLLM``
that is killed (``omniplane rehearse --kill-replica``, or a crash) would leave its engine core
and worker running, holding memory and cores. A daemon thread here notices the reparenting
(``os.getppid()`` changes) within a second and ends the process. Off by default: vLLM loads
general plugins in every process, and ordinary servers must not change behaviour.
"""

from __future__ import annotations

import os
import threading
import time

ENV = "OMNIPLANE_EXIT_WITH_PARENT"
POLL_S = 1.0
_started: list[int] = []  # pids that run the watcher (a forked child must start its own)


def _watch(parent: int) -> None:
    while True:
        time.sleep(POLL_S)
        if os.getppid() != parent:
            os._exit(0)


def register() -> None:
    """vLLM's ``vllm.general_plugins`` entry point (pyproject.toml)."""
    if os.environ.get(ENV) != "1" or os.getpid() in _started:
        return
    _started.append(os.getpid())
    threading.Thread(target=_watch, args=(os.getppid(),), name="omniplane-exit-with-parent",
                     daemon=True).start()
