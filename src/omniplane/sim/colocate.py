"""Put executors on one shared GPU (HorizonServe's single-GPU setting).

A :class:`SharedGPU` in the run's setup names a shared-stage executor and its downstream
executors; :func:`omniplane.sim.build.build_topology` puts them on one GPU slot (``timeslice``,
``mps`` or ``split``, see :mod:`omniplane.sim.gpu`), makes their steps report roofline work
(its host part for time slicing, its bytes and FLOPs for the co-location model), and gives
the shared stage's LLM engines the signals a policy reads: how many requests the downstream
stages hold, and the GPU's memory-bandwidth utilisation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from omniplane.sim.executor import Executor, GPUSlot
from omniplane.sim.gpu import Colocated, TimeSliced
from omniplane.sim.llm import LLMEngine

MODES = ("timeslice", "mps", "split")


@dataclass(frozen=True)
class SharedGPU:
    """Executor ``stage`` (the shared stage) and ``downstream`` executors on one GPU.

    ``colocation`` is the co-location model for ``mps`` / ``split`` (default:
    :class:`omniplane.perf.ColocationModel`)."""

    stage: str
    downstream: tuple[str, ...]
    mode: str
    colocation: Any = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")


def share(executors: Sequence[Executor], spec: SharedGPU, cost: Any) -> GPUSlot:
    """Put the named executors on one GPU slot (called while the topology is built)."""
    by_name = {ex.name: ex for ex in executors}
    missing = [n for n in (spec.stage, *spec.downstream) if n not in by_name]
    if missing:
        raise KeyError(f"no executor named {missing} (have {sorted(by_name)})")
    stage0, others = by_name[spec.stage], [by_name[n] for n in spec.downstream]
    slot: GPUSlot
    cfg = stage0.engines[0].cfg
    if spec.mode == "timeslice":
        slot = TimeSliced(cfg.gpu)
    else:
        from omniplane.perf import ColocationModel

        slot = Colocated(spec.mode, cfg.gpu, cost.efficiency(cfg), spec.colocation or ColocationModel(),
                         spec.stage)
    for ex in (stage0, *others):
        ex.gpu = slot
        if isinstance(slot, TimeSliced):
            slot.join(ex)
        ex.can_span = False  # a policy or the co-location model must see every iteration
        for engine in ex.engines:
            engine.want_work = True  # time slicing splits each step into host and GPU time

    def signals() -> tuple[int, float]:
        return sum(o.outstanding() for o in others), float(getattr(slot, "utilization", 0.0))

    for engine in stage0.engines:
        if isinstance(engine, LLMEngine):
            engine.context_provider = signals
    return slot
