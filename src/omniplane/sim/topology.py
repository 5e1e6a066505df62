"""The runnable shape of a plan: nodes, executor groups, executors, and per-type routing.

Where a request sits at a node (its *seat*) is chosen once per node: an executor group by the
plan's group probabilities; on a single-component node the group's shared FCFS queue, which
idle executors pull from; on a merged node one executor of the group (the one with the fewest
requests pinned, join-shortest-queue), which runs all the request's components there.
"""

from __future__ import annotations

import bisect
import random
from collections import deque
from dataclasses import dataclass, field
from functools import partial

from omniplane.sim.engines import Engine
from omniplane.sim.executor import Executor
from omniplane.sim.job import Job
from omniplane.sim.processes import Processes


@dataclass(eq=False)
class Group:
    """Executors of one configuration in a node; single-component nodes share a queue. An executor
    whose stages run as separate processes on one GPU is a :class:`Processes` (a seat, not an
    executor: the compiled simulator checks these types)."""

    executors: list[Executor | Processes]
    shared: deque[Job] | None = None

    def __post_init__(self) -> None:
        self.by_comp: dict[str, Engine] = self.executors[0].by_comp  # whose queue is shared

    def least_loaded(self) -> int:
        """Index of the executor with the fewest requests pinned to it (ties: lowest index)."""
        exs = self.executors
        best, load = 0, exs[0].load
        for i in range(1, len(exs)):
            if exs[i].load < load:
                best, load = i, exs[i].load
        return best

    def offer(self, job: Job) -> None:
        """A job joins the group's shared queue: idle executors pull it first (their steps form
        at the end of the instant); if it still waits then, busy ones take it at their next
        iteration boundary."""
        executors = self.executors
        job.host.add(job, True)
        if len(executors) == 1:
            executors[0].kick()
            return
        for ex in executors:
            if not ex.busy:
                ex.kick()
        executors[0].loop.soon(partial(self._spill, job))

    def _spill(self, job: Job) -> None:
        if job.engine is None:
            for ex in self.executors:
                if ex.busy:
                    ex.kick()


@dataclass(eq=False)
class Node:
    name: str
    components: tuple[str, ...]
    groups: list[Group]
    group_cum: dict[str, list[float]]  # per type: cumulative group probabilities

    def __post_init__(self) -> None:
        # the seat of every request, where there is no choice to make (one group's shared queue)
        one = len(self.components) == 1 and len(self.groups) == 1
        self.fixed: Group | None = self.groups[0] if one else None

    @property
    def shared_queue(self) -> bool:
        return len(self.components) == 1

    def pick_group(self, type_name: str, rnd: random.Random) -> int:
        cum = self.group_cum[type_name]
        if len(cum) == 1:
            return 0
        return min(bisect.bisect_right(cum, rnd.random() * cum[-1]), len(cum) - 1)

    def seat(self, type_name: str, rnd: random.Random) -> Group | Executor | Processes:
        """Where a request arriving here sits: its group's shared queue, or (merged node) the
        least-loaded executor of its group, pinned (the caller unpins it when done here)."""
        group = self.groups[self.pick_group(type_name, rnd)]
        if len(self.components) == 1:
            return group
        ex = group.executors[group.least_loaded()]
        ex.load += 1
        return ex


@dataclass(eq=False)
class Topology:
    nodes: dict[str, Node]
    # per type: cumulative route probabilities and, per route, component -> node name
    routes: dict[str, tuple[list[float], list[dict[str, str]]]]
    transfer_s: float = 0.0
    executors: list[Executor] = field(default_factory=list)
    kv_seconds_per_token: dict[str, float] = field(default_factory=dict)  # prefill phase -> KV handover
    # mixed fleets (groups naming their GPU kind): (from component, to component, from node, to
    # node) -> (link latency s, link seconds per unit of the sender's work, those work fields),
    # paid on top of ``transfer_s`` (omniplane.perf.links; built by omniplane.sim.build)
    edge_cost: dict[tuple[str, str, str, str], tuple[float, float, tuple[str, ...]]] = field(
        default_factory=dict)

    def pick_route(self, type_name: str, rnd: random.Random) -> dict[str, str]:
        cum, maps = self.routes[type_name]
        if len(maps) == 1:
            return maps[0]
        return maps[min(bisect.bisect_right(cum, rnd.random() * cum[-1]), len(maps) - 1)]
