"""Chrome trace format (chrome://tracing, Perfetto): one complete event per executor step.

Processes are plan nodes, threads are executors; times in microseconds. Needs a run made with
``RunSetup(trace=True)``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omniplane.sim.metrics import SimResult


def chrome_trace(result: SimResult) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    pids: dict[str, int] = {}
    for ex in result.trace:
        if ex.node not in pids:
            pids[ex.node] = len(pids) + 1
            events.append({"name": "process_name", "ph": "M", "pid": pids[ex.node], "tid": 0,
                           "args": {"name": ex.node}})
    for tid, ex in enumerate(result.trace, start=1):
        pid = pids[ex.node]
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"name": ex.name}})
        for start, end, comp, kind, batch, iterations in ex.steps:
            events.append({"name": f"{comp} {kind}", "cat": kind, "ph": "X", "pid": pid,
                           "tid": tid, "ts": start * 1e6, "dur": (end - start) * 1e6,
                           "args": {"batch": batch, "iterations": iterations}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(result: SimResult, path: Path) -> None:
    path.write_text(json.dumps(chrome_trace(result)))
