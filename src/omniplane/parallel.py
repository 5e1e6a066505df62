"""Worker processes that stop when the command stops.

``ProcessPoolExecutor``'s own ``with`` block waits for every submitted task when an exception
(Ctrl-C, SIGTERM) leaves it, and Ctrl-C reaches the workers too. :func:`map_processes` runs the
tasks in a pool whose workers ignore SIGINT and take SIGTERM's default action (the parent decides),
and on any exception, an interruption included, cancels what has not started and terminates the
workers at once, so the command ends in well under a second instead of after every run.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any, TypeVar

POLL_S = 0.2  # seconds; assumption: well within the 5 s docs/reference/command-line.md promises
MANAGER_JOIN_S = 2.0  # seconds; assumption: the manager thread ends at once when its workers are gone
T = TypeVar("T")
R = TypeVar("R")


STOP = {signal.SIGINT, signal.SIGTERM}


def _worker_signals() -> None:
    # the terminal's Ctrl-C goes to the whole process group: the parent handles it; a worker
    # must not inherit the parent's Python SIGTERM handler (it would be caught as a task error).
    # Both were blocked while the worker was forked (map_processes): unblock them once reset.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP)


def map_processes(fn: Callable[[T], R], tasks: Iterable[T], jobs: int) -> Generator[tuple[T, R], None, None]:
    """``(task, fn(task))`` in task order, computed by ``jobs`` worker processes. Closing the
    iterator early or an exception while it runs terminates the workers (use it in a ``for``
    loop; the loop's exception closes it)."""
    from concurrent.futures import ProcessPoolExecutor

    todo = list(tasks)
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_signals)
    futures: list[Any] = []
    # SIGINT / SIGTERM blocked while the workers are forked and the pool's threads start: a
    # worker never runs the parent's handler, and the threads never take a signal, so it
    # reaches the main thread (held until the mask is restored, then handled at once)
    main = threading.current_thread() is threading.main_thread()
    saved = signal.pthread_sigmask(signal.SIG_BLOCK, STOP) if main else None
    try:
        try:
            futures = [pool.submit(fn, t) for t in todo]
        finally:
            if saved is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, saved)
        for t, f in zip(todo, futures, strict=True):
            yield t, _result(f)
    except BaseException:  # an interruption, a failed task, or the loop left early (GeneratorExit)
        terminate(pool, futures)
        raise
    pool.shutdown(wait=True)


def _result(future: Any) -> Any:
    """``future.result()``, waiting in short slices: a signal the kernel hands to one of the
    pool's threads sets Python's flag but does not wake a main thread blocked on a lock, so
    the main thread must come back to run the handler (and stop) within :data:`POLL_S`."""
    while True:
        try:
            return future.result(timeout=POLL_S)
        except FuturesTimeout:
            continue


def terminate(pool: Any, futures: Iterable[Any] = ()) -> None:
    """End ``pool``'s worker processes now (SIGTERM, then SIGKILL) and drop its queued tasks:
    the pool's futures end as cancelled or broken, none is waited for."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=1)
        if p.is_alive():
            p.kill()
            p.join(timeout=1)
    pool.shutdown(wait=False)
    # the pool's manager thread closes its wake-up pipe as it ends; if it is still ending when
    # the interpreter exits, CPython 3.11's exit hook can write to that pipe as it closes
    # (OSError: Bad file descriptor printed after the command's last line): let it end first
    if manager is not None and manager.is_alive():
        manager.join(timeout=MANAGER_JOIN_S)
