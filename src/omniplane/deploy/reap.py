"""Processes this process started, directly or not, and ending the ones a shutdown left behind.

``ray.shutdown`` stops the processes of a local node it started, but an agent the raylet had
just started (its dashboard agent, its runtime-env agent) outlives a node stopped during
start-up: the agent ends itself only once it is up and sees its raylet gone. Linux only (read
from /proc); elsewhere :func:`descendants` finds nothing and nothing is ended.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


def kill_descendants(before: set[Proc], rounds: int = 20) -> int:
    """SIGKILL this process's descendants not in ``before``, again for what they started
    meanwhile, until none is left (at most ``rounds`` rounds, 50 ms apart); returns how many."""
    n = 0
    for _ in range(rounds):
        left = descendants() - before
        if not left:
            break
        for pid, _start in left:
            try:
                os.kill(pid, signal.SIGKILL)
                n += 1
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    return n


@contextmanager
def deadline_on_signal(before: set[Proc], budget_s: float,
                       signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM),
                       status: Callable[[int], int] | None = None) -> Iterator[None]:
    """While the block runs, one of ``signals`` (with a Python handler, as the CLI installs) also
    wakes a thread: if the block has not ended ``budget_s`` after the signal (its handler not yet
    run, or the shutdown it started still going), the thread SIGKILLs the descendants not in
    ``before`` (:func:`kill_descendants`) and ends the process with ``status(signal)`` (default
    128 + the signal; the caller's rule, e.g. 0 for a stop while serving). Its one line on stderr
    is dropped rather than wait on a full pipe (a parent not reading it must not hang the exit). The
    signal reaches the thread through ``signal.set_wakeup_fd``, written when the signal arrives,
    whatever the main thread is doing. Main thread on Linux only; elsewhere the block just runs."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        yield
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    done = threading.Event()

    def watch() -> None:
        while True:
            try:
                data = os.read(r, 64)
            except OSError:
                return
            if not data:  # the block ended: the write end is closed
                return
            hit = [b for b in data if b in signals]
            if hit:
                break
        if done.wait(budget_s):
            return
        killed = kill_descendants(before)
        code = 128 + hit[0] if status is None else status(hit[0])
        try:
            os.set_blocking(2, False)  # the process ends next: nothing else writes to it
            os.write(2, f"omniplane: shutdown not done {budget_s:g} s after {signal.Signals(hit[0]).name}; "
                        f"killed {killed} processes\n".encode())
        except OSError:
            pass
        finally:
            os._exit(code)

    watcher = threading.Thread(target=watch, name="omniplane-stop-deadline", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        signal.set_wakeup_fd(old)
        os.close(w)
        watcher.join(timeout=1.0)
        if not watcher.is_alive():
            os.close(r)
