"""Per-executor counters updated at every step (busy time, iterations by kind, a sampled
queue-length timeline, an optional step trace) and their summary: a module of its own so that
the compiled executor (``sim/native.py``) updates them as native attributes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np


class ExecutorStats:
    """Busy time and a queue-length timeline of one executor; optionally a trace of steps
    (the executor records each step as it ends, and the queue length at a step end at most
    every ``SAMPLE_S`` seconds)."""

    __slots__ = ("busy", "by_kind", "name", "next_sample", "queue", "steps", "trace")
    SAMPLE_S: ClassVar[float] = 0.05  # queue-length timeline resolution (seconds)

    def __init__(self, name: str, trace: bool = False) -> None:
        self.name = name
        self.busy = 0.0
        self.steps = 0
        self.by_kind: dict[str, int] = {}
        self.queue: list[tuple[float, int]] = []  # (time, outstanding requests), sampled
        self.next_sample = 0.0
        self.trace: list[tuple[float, float, str, str, int, int]] | None = [] if trace else None

    def summary(self, horizon: float) -> dict[str, Any]:
        q = np.array([n for _, n in self.queue]) if self.queue else np.zeros(1)
        return {
            "utilisation": self.busy / horizon if horizon > 0 else 0.0,
            "steps": self.steps,
            "steps_by_kind": dict(self.by_kind),
            "queue_mean": float(_time_weighted_mean(self.queue, horizon)),
            "queue_max": int(q.max()),
        }


def _time_weighted_mean(points: Sequence[tuple[float, int]], horizon: float) -> float:
    if not points or horizon <= 0:
        return 0.0
    total, prev_t, prev_n = 0.0, 0.0, 0
    for t, n in points:
        total += prev_n * (min(t, horizon) - prev_t)
        prev_t, prev_n = min(t, horizon), n
    total += prev_n * (horizon - prev_t)
    return total / horizon
