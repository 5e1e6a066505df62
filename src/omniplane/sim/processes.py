"""Stages as separate processes on one GPU: how vLLM-Omni runs a plan node that holds several of
its stages (``PlanNode.sharing``).

Each executor of such a node becomes one :class:`Executor` per stage (the stage's engines), all
on one GPU slot of the node's sharing mode (:mod:`omniplane.sim.gpu`): ``timeslice`` (CUDA's
default: the stages' kernels take turns, one stage's host time leaves the GPU to the others) or
``mps`` (concurrent, DRAM and compute shared by the co-location model). A :class:`Processes`
stands for them where the topology seats a request (routing, pinning, least-loaded choice), so
a request's components at the node run on the stage processes of one executor. Without
``sharing`` a node's components take turns inside one executor (a merged executor).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omniplane.sim.engines import Engine
from omniplane.sim.executor import Executor, GPUSlot
from omniplane.sim.gpu import Colocated, TimeSliced
from omniplane.sim.job import Job


class Processes:
    """One plan executor whose stages run as separate processes (module docstring): the seat
    the topology pins requests to; each job goes to its stage's process."""

    def __init__(self, name: str, node: str, stages: Sequence[Executor]) -> None:
        self.name, self.node, self.stages = name, node, list(stages)
        self.engines: list[Engine] = [e for ex in self.stages for e in ex.engines]
        self.by_comp: dict[str, Engine] = {e.comp: e for e in self.engines}
        self.load = 0  # requests pinned here and not yet through (JSQ routing)
        self.loop = self.stages[0].loop

    @property
    def busy(self) -> bool:
        return any(ex.busy for ex in self.stages)

    def offer(self, job: Job) -> None:
        job.host.add(job, False)
        job.host.executor.kick()

    def outstanding(self) -> int:
        return sum(ex.outstanding() for ex in self.stages)

    def kick(self, _: object = None) -> None:
        for ex in self.stages:
            ex.kick()


def slot_for(mode: str, cfg: Any, cost: Any, shared_stage: str) -> GPUSlot:
    """The GPU the stage processes share: :class:`TimeSliced` or :class:`Colocated` (``mps``)."""
    if mode == "timeslice":
        return TimeSliced(cfg.gpu)
    if mode != "mps":
        raise ValueError(f"PlanNode.sharing: expected 'timeslice' or 'mps', got {mode!r}")
    from omniplane.perf import ColocationModel

    return Colocated("mps", cfg.gpu, cost.efficiency(cfg), ColocationModel(), shared_stage)


def split(name: str, node: str, engines: list[Engine], stage_of: dict[str, int], mode: str, cfg: Any,
          cost: Any, make: Any) -> tuple[Processes, list[Executor]]:
    """``engines`` of one plan executor as one process per stage on a shared GPU slot;
    ``make(name, engines)`` builds an :class:`Executor`. Returns the seat and the processes."""
    by_stage: dict[int, list[Engine]] = {}
    for e in engines:
        by_stage.setdefault(stage_of[e.comp], []).append(e)
    stages = sorted(by_stage)
    slot = slot_for(mode, cfg, cost, f"{name}:{stages[0]}")
    procs: list[Executor] = []
    for s in stages:
        ex: Executor = make(f"{name}:{s}", by_stage[s])
        ex.gpu = slot
        ex.can_span = False  # the GPU's sharing must see every iteration
        for e in ex.engines:
            e.want_work = True  # host and GPU time of each step (time slicing, co-location)
        if isinstance(slot, TimeSliced):
            slot.join(ex)
        procs.append(ex)
    return Processes(name, node, procs), procs
