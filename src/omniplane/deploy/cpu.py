"""CPU use during a rehearsal, from ``/proc`` (Linux): the whole machine's busy fraction and the
CPU time of this process and its descendants (the local Ray cluster: GCS, raylet, workers)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from omniplane.loadgen.affinity import proc_stats

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine() -> tuple[float, float] | None:
    """(busy, total) jiffies over all CPUs."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    v = [float(x) for x in fields]
    idle = v[3] + (v[4] if len(v) > 4 else 0.0)  # idle + iowait
    return sum(v) - idle, sum(v)


def _tree_cpu(root: int) -> float:
    """utime + stime (seconds) of ``root`` and every live descendant."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for pid, rest in proc_stats():
        parent[pid] = int(rest[1])
        cpu[pid] = (float(rest[11]) + float(rest[12])) / _TICK
    mine = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return sum(cpu.get(p, 0.0) for p in mine)


@dataclass
class CpuMeter:
    """Start at construction, read with :meth:`stop`."""

    t0: float = 0.0
    machine0: tuple[float, float] | None = None
    ours0: float = 0.0

    def __post_init__(self) -> None:
        self.t0 = time.monotonic()
        self.machine0 = _machine()
        self.ours0 = _tree_cpu(os.getpid()) if Path("/proc").exists() else 0.0

    def stop(self) -> dict[str, float | None]:
        wall = time.monotonic() - self.t0
        cores = os.cpu_count() or 1
        m1 = _machine()
        busy = None
        if self.machine0 and m1 and m1[1] > self.machine0[1]:
            busy = (m1[0] - self.machine0[0]) / (m1[1] - self.machine0[1])
        ours = (_tree_cpu(os.getpid()) - self.ours0) if Path("/proc").exists() else None
        return {
            "wall_s": wall,
            "cores": float(cores),
            "machine_busy": busy,  # all processes on the machine, fraction of all cores
            "ours_cpu_s": ours,  # the rehearsal: driver, load generator, Ray cluster
            "ours_busy": ours / (wall * cores) if ours is not None and wall > 0 else None,
            "headroom": 1.0 - busy if busy is not None else None,
        }
