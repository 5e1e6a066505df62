"""Processes this process started, directly or not, and ending the ones a shutdown left behind.

``ray.shutdown`` stops the processes of a local node it started, but an agent the raylet had
just started (its dashboard agent, its runtime-env agent) outlives a node stopped during
start-up: the agent ends itself only once it is up and sees its raylet gone. Linux only (read
from /proc); elsewhere :func:`descendants` finds nothing and nothing is ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

Proc = tuple[int, str]  # pid and its start time (field 22 of /proc/PID/stat): one process, not its pid reused


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(root: int | None = None) -> set[Proc]:
    """The live processes descended from ``root`` (default: this process), with start times."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    try:
        entries = [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()]
    except OSError:
        return set()
    for pid in entries:
        f = _stat(pid)
        if f is not None and f[0] != "Z":
            children.setdefault(int(f[1]), []).append(pid)
            started[pid] = f[19]
    out: set[Proc] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in started:
            out.add((pid, started[pid]))
            todo += children.get(pid, [])
    return out


def _alive(proc: Proc) -> bool:
    f = _stat(proc[0])
    return f is not None and f[0] != "Z" and f[19] == proc[1]


def end_leftovers(procs: set[Proc], grace_s: float) -> list[int]:
    """Wait up to ``grace_s`` for ``procs`` to end, then SIGKILL those still running (each only
    if it is still the same process); returns the pids killed."""
    deadline = time.monotonic() + grace_s
    left = {p for p in procs if _alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {p for p in left if _alive(p)}
    killed = []
    for p in sorted(left):
        if _alive(p):
            try:
                os.kill(p[0], signal.SIGKILL)
                killed.append(p[0])
            except ProcessLookupError:
                pass
    return killed


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper() -> bool:
    """Orphans among this process's descendants are re-parented to it, not to init (Linux
    ``PR_SET_CHILD_SUBREAPER``), so :func:`descendants` still finds an agent whose raylet died
    first. False where it is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


# Ray's shutdown can block for minutes on two busy cores (seen: Ctrl-C while serving, no exit after
# 120 s); a separate process, which needs no GIL or event loop of ours, ends what is left (assumption: 5 s)
STOP_WATCHDOG_S = 5.0
_WATCHDOG = """
import os, signal, sys, time
pid, wait = int(sys.argv[1]), float(sys.argv[2])
end = time.monotonic() + wait
def running(p):
    try:
        return open(f"/proc/{p}/stat").read().split()[2] != "Z"
    except OSError:
        return False
while time.monotonic() < end and running(pid):
    time.sleep(0.2)
def kids(p):
    found = []
    try:
        tasks = os.listdir(f"/proc/{p}/task")
    except OSError:
        return found
    for t in tasks:
        try:
            found += [int(c) for c in open(f"/proc/{p}/task/{t}/children").read().split()]
        except OSError:
            pass
    return found
for _ in range(20):
    todo, seen = [pid], []
    while todo:
        for c in kids(todo.pop()):
            seen.append(c)
            todo.append(c)
    if not seen:
        break
    for c in seen:
        try:
            os.kill(c, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.1)
"""


def stop_watchdog(pid: int, wait_s: float) -> None:
    """After ``wait_s``, SIGKILL what process ``pid`` started and still runs (Linux /proc; elsewhere
    it finds nothing), so a stop whose Ray shutdown blocks ends; ``pid`` itself is left to exit."""
    with contextlib.suppress(OSError):
        subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(pid), str(wait_s)], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
