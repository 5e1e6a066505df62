"""Keep the load generator off the engine's cores (Linux CPU affinity).

On a small host the client that measures an engine competes with it for the same cores: a
load generator descheduled for 50 ms sends its requests late and stamps their tokens late, and
that time is counted as the engine's. vLLM's CPU build binds its worker's OpenMP threads to
cores of its own choosing (``VLLM_CPU_OMP_THREADS_BIND=auto``: on a 2-core host, core 0, with
core 1 "reserved" for everything else) but leaves every other process and thread free to run on
any core, the load generator included.

:func:`separate` reads which cores the engine's process group has bound (threads whose
affinity is narrower than the host's), and pins **every other thread of that group** (the API
server, the engine-core process's scheduler loop, helper threads) and **this process's
threads** (the load generator and the profiler's probes) to the remaining cores. The engine's
own bound threads are left as they are. Undone for this process on exit (the server's threads
stay pinned until it stops). A heuristic of this host's layout, labelled as such in the output:
it isolates the engine from the client, not from other jobs on the machine.

Two layouts (``layout``): ``"worker"`` gives the worker its cores alone and puts the rest of the
engine (API server, engine core) with the client; ``"client"`` gives the **client** the cores
the worker did not bind alone and puts the rest of the engine with the worker, so the whole
engine (worker, engine core, API server) is measured on its cores and the load generator can
never be what binds it. :func:`cpu_split` reads how busy each part was (``/proc`` CPU times),
so a run can tell which core bound it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")


@dataclass(frozen=True)
class Pinning:
    """Which cores the engine holds and where the rest went; ``pinned`` is False (with the
    reason in ``note``) when nothing could be separated."""

    pinned: bool
    engine_cpus: tuple[int, ...] = ()
    client_cpus: tuple[int, ...] = ()
    moved_threads: int = 0
    note: str = ""
    layout: str = "worker"  # where the engine's other threads went: with the client, or the worker
    worker_pids: tuple[int, ...] = ()  # processes holding the bound threads (the engine's worker)

    def to_json(self) -> dict[str, Any]:
        return {"pinned": self.pinned, "engine_cpus": list(self.engine_cpus),
                "client_cpus": list(self.client_cpus), "moved_threads": self.moved_threads,
                "note": self.note, "layout": self.layout, "worker_pids": list(self.worker_pids)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Pinning:
        return cls(bool(d["pinned"]), tuple(d.get("engine_cpus", ())), tuple(d.get("client_cpus", ())),
                   int(d.get("moved_threads", 0)), str(d.get("note", "")), str(d.get("layout", "worker")),
                   tuple(d.get("worker_pids", ())))

    def describe(self) -> str:
        if not self.pinned:
            return f"client not pinned: {self.note}"
        if self.layout == "client":
            return (f"load generator alone on cores {list(self.client_cpus)}; the engine's worker and "
                    f"{self.moved_threads} other engine threads (API server, engine core) on cores "
                    f"{list(self.engine_cpus)}")
        return (f"engine worker on cores {list(self.engine_cpus)}; load generator and {self.moved_threads} "
                f"other engine threads (API server, engine core) pinned to cores {list(self.client_cpus)}")


def host_cpus() -> frozenset[int]:
    """The cores this process may run on."""
    return frozenset(os.sched_getaffinity(0))


def proc_stats() -> Iterator[tuple[int, list[str]]]:
    """``(pid, fields)`` of every live process's ``/proc/PID/stat``, the fields after the
    command name (which may hold spaces and parentheses): state, ppid, pgrp, ..., utime (11),
    stime (12)."""
    for d in PROC.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        yield int(d.name), stat.rsplit(")", 1)[-1].split()


def group_pids(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``."""
    return sorted(pid for pid, fields in proc_stats() if len(fields) > 2 and int(fields[2]) == pgid)


def threads(pid: int) -> list[int]:
    try:
        return sorted(int(t.name) for t in (PROC / str(pid) / "task").iterdir())
    except OSError:
        return []


def _affinity(tid: int) -> frozenset[int] | None:
    try:
        return frozenset(os.sched_getaffinity(tid))
    except OSError:
        return None  # the thread ended


def bound_pids(pgid: int, host: frozenset[int] | None = None) -> tuple[int, ...]:
    """The group's processes with a thread bound narrower than ``host`` (the engine's worker)."""
    host = host_cpus() if host is None else host
    return tuple(pid for pid in group_pids(pgid)
                 if any((a := _affinity(t)) is not None and a < host for t in threads(pid)))


def engine_cpus(pgid: int, host: frozenset[int] | None = None) -> frozenset[int]:
    """The cores the group's threads are bound to: the union of every affinity narrower than
    ``host`` (the engine's OpenMP binding); empty when nothing is bound."""
    host = host_cpus() if host is None else host
    bound: set[int] = set()
    for pid in group_pids(pgid):
        for tid in threads(pid):
            aff = _affinity(tid)
            if aff is not None and aff < host:
                bound |= aff
    return frozenset(bound)


def pin_unbound(pgid: int, cpus: frozenset[int], host: frozenset[int]) -> list[int]:
    """Pin every thread of the group whose affinity is the whole ``host`` to ``cpus``; returns
    the threads moved (threads bound narrower are the engine's own choice and stay)."""
    moved = []
    for pid in group_pids(pgid):
        for tid in threads(pid):
            if _affinity(tid) == host:
                with contextlib.suppress(OSError):  # it ended meanwhile
                    os.sched_setaffinity(tid, cpus)
                    moved.append(tid)
    return moved


def _pin_self(cpus: frozenset[int]) -> dict[int, frozenset[int]]:
    before = {}
    for tid in threads(os.getpid()):
        aff = _affinity(tid)
        if aff is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus)
                before[tid] = aff
    return before


LAYOUTS = ("worker", "client")


@contextlib.contextmanager
def separate(pgid: int, restore_group: bool = False, layout: str = "worker") -> Iterator[Pinning]:
    """Pin this process to the cores the engine did not bind and the engine group's unbound
    threads to those too (``layout="worker"``) or to the worker's (``"client"``), for the
    duration of the block (this process's affinity is restored after; the group's moved threads
    too with ``restore_group``, for an A/B comparison on one engine)."""
    if layout not in LAYOUTS:
        raise ValueError(f"pinning layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    host = host_cpus()
    bound = engine_cpus(pgid, host)
    rest = host - bound
    if not bound:
        yield Pinning(False, note="the engine bound no core (nothing to keep the client off)")
        return
    if not rest:
        yield Pinning(False, engine_cpus=tuple(sorted(bound)),
                      note=f"the engine bound every core this process may use ({sorted(host)})")
        return
    workers = bound_pids(pgid, host)
    moved = pin_unbound(pgid, bound if layout == "client" else rest, host)
    before = _pin_self(rest)
    if restore_group:
        before.update(dict.fromkeys(moved, host))
    what = "the client from the whole engine" if layout == "client" else "the client from the engine's worker"
    try:
        yield Pinning(True, tuple(sorted(bound)), tuple(sorted(rest)), len(moved),
                      f"heuristic of this host's layout: separates {what}, not from other jobs on the "
                      "machine", layout, workers)
    finally:
        for tid, aff in before.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, aff)


def engine_core_threads(pgid: int, worker_pids: tuple[int, ...]) -> list[int]:
    """Threads of the group's processes that are neither its leader (the API server) nor its
    workers: vLLM's engine-core process, whose scheduler loop busy-polls the worker's queue."""
    return [t for pid in group_pids(pgid) if pid != pgid and pid not in worker_pids for t in threads(pid)]


def renice(tids: list[int], nice: int) -> int:
    """Set the scheduling niceness of each thread (Linux: per thread); returns how many were set.
    A heuristic of this host (docs/decisions/0107-engine-core-renice.md): a positive niceness lets a
    yield-spinning engine core run only in the time the API server and the client leave."""
    done = 0
    for tid in tids:
        with contextlib.suppress(OSError):  # it ended meanwhile
            os.setpriority(os.PRIO_PROCESS, tid, nice)
            done += 1
    return done


@contextlib.contextmanager
def isolate_engine(pgid: int, layout: str = "worker",
                   nice_engine_core: int = 0) -> Iterator[tuple[Pinning, int]]:
    """:func:`separate` and then, when the client could be pinned and ``nice_engine_core`` > 0,
    :func:`renice` of the engine-core process's threads (:func:`engine_core_threads`): the one
    composition ``omniplane fidelity --fixture`` and the live-scheduler bench both run. Yields the
    pinning and how many engine-core threads were reniced (0 when none was)."""
    with separate(pgid, layout=layout) as pinning:
        niced = 0
        if nice_engine_core and pinning.pinned:
            niced = renice(engine_core_threads(pgid, pinning.worker_pids), nice_engine_core)
        yield pinning, niced


def thread_cpu_s(pid: int, tid: int) -> tuple[float, float]:
    """(CPU seconds, seconds runnable but waiting for a CPU) of one thread so far: the
    scheduler's own nanosecond counters (``schedstat``: time on a CPU, time waiting for one),
    the clock-tick ``stat`` times (10 ms resolution) where ``schedstat`` is missing."""
    task = PROC / str(pid) / "task" / str(tid)
    try:
        sched = (task / "schedstat").read_text().split()
        if len(sched) > 1:
            return int(sched[0]) / 1e9, int(sched[1]) / 1e9
        fields = (task / "stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return 0.0, 0.0  # it ended meanwhile
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 0.0


CPU_PARTS = ("worker", "server", "api", "client")


def cpu_split(pgid: int, worker_pids: tuple[int, ...]) -> dict[str, float]:
    """CPU seconds used so far by the engine group's **worker** processes (``worker_pids``: those
    holding the bound threads, :attr:`Pinning.worker_pids`), its **other** processes
    (``server``: API server and engine core), of which the group's leader (``api``: the API
    server, the process :class:`~omniplane.fidelity.server.VllmServer` starts; ``server - api`` is
    the engine core), and this process (**client**), and (``<part>_wait``) the seconds their
    threads were runnable but waiting for a CPU (``/proc/.../schedstat``: taken by other threads,
    of this run or of other jobs). Read twice around a run, the differences over its wall time are
    each part's busy and CPU-starved shares in cores: a worker neither busy nor waiting for a CPU
    was waiting for work. Threads that ended are not counted."""
    out = dict.fromkeys((*CPU_PARTS, *(f"{p}_wait" for p in CPU_PARTS)), 0.0)

    def add(part: str, pid: int) -> tuple[float, float]:
        cpu = wait = 0.0
        for t in threads(pid):
            c, w = thread_cpu_s(pid, t)
            cpu, wait = cpu + c, wait + w
        out[part] += cpu
        out[f"{part}_wait"] += wait
        return cpu, wait

    for pid in group_pids(pgid):
        cpu, wait = add("worker" if pid in worker_pids else "server", pid)
        if pid == pgid and pid not in worker_pids:
            out["api"] += cpu
            out["api_wait"] += wait
    add("client", os.getpid())
    return out
