"""The runnable shape of a plan: nodes, executor groups, executors, and per-type routing."""

from __future__ import annotations

import bisect
import random
from collections import deque
from dataclasses import dataclass, field

from omniplane.sim.executor import Executor
from omniplane.sim.job import Job


@dataclass(eq=False)
class Group:
    """Executors of one configuration in a node; single-component nodes share a queue."""

    executors: list[Executor]
    shared: deque[Job] | None = None

    def least_loaded(self) -> int:
        """Index of the executor with the fewest requests pinned to it (ties: lowest index)."""
        exs = self.executors
        best, load = 0, exs[0].load
        for i in range(1, len(exs)):
            if exs[i].load < load:
                best, load = i, exs[i].load
        return best


@dataclass(eq=False)
class Node:
    name: str
    components: tuple[str, ...]
    groups: list[Group]
    group_cum: dict[str, list[float]]  # per type: cumulative group probabilities

    @property
    def shared_queue(self) -> bool:
        return len(self.components) == 1

    def pick_group(self, type_name: str, rnd: random.Random) -> int:
        cum = self.group_cum[type_name]
        if len(cum) == 1:
            return 0
        return min(bisect.bisect_right(cum, rnd.random() * cum[-1]), len(cum) - 1)


@dataclass(eq=False)
class Topology:
    nodes: dict[str, Node]
    # per type: cumulative route probabilities and, per route, component -> node name
    routes: dict[str, tuple[list[float], list[dict[str, str]]]]
    transfer_s: float = 0.0
    executors: list[Executor] = field(default_factory=list)

    def pick_route(self, type_name: str, rnd: random.Random) -> dict[str, str]:
        cum, maps = self.routes[type_name]
        if len(maps) == 1:
            return maps[0]
        return maps[min(bisect.bisect_right(cum, rnd.random() * cum[-1]), len(maps) - 1)]
