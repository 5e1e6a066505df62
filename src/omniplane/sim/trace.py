"""Chrome trace format (chrome://tracing, Perfetto): one complete event per executor step.

Processes are plan nodes, threads are executors; times in microseconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omniplane.sim.topology import Topology


def chrome_trace(topology: Topology) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    pids = {name: i + 1 for i, name in enumerate(topology.nodes)}
    for name, pid in pids.items():
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                       "args": {"name": name}})
    for tid, ex in enumerate(topology.executors, start=1):
        pid = pids[ex.node]
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"name": ex.name}})
        for start, end, comp, kind, batch in ex.stats.trace or []:
            events.append({"name": f"{comp} {kind}", "cat": kind, "ph": "X", "pid": pid,
                           "tid": tid, "ts": start * 1e6, "dur": (end - start) * 1e6,
                           "args": {"batch": batch}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(topology: Topology, path: Path) -> None:
    path.write_text(json.dumps(chrome_trace(topology)))
