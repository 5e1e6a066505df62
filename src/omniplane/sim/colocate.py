"""Put executors on one shared GPU (HorizonServe's single-GPU setting).

``share_gpu`` moves a shared-stage executor and its downstream executors onto one GPU slot
(``timeslice``, ``mps`` or ``split``, see :mod:`omniplane.sim.gpu`), makes their steps report
roofline work where the co-location model needs it, and gives the shared stage's LLM engines
the signals a policy reads: how many requests the downstream stages hold, and the GPU's
memory-bandwidth utilisation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omniplane.sim.gpu import Colocated, GPUSlot, TimeSliced
from omniplane.sim.llm import LLMEngine
from omniplane.sim.topology import Topology

MODES = ("timeslice", "mps", "split")


def share_gpu(topo: Topology, shared: str, downstream: Sequence[str], mode: str, cost: Any,
              colocation: Any = None) -> GPUSlot:
    """Co-locate executor ``shared`` (the shared stage) with ``downstream`` executors."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    by_name = {ex.name: ex for ex in topo.executors}
    missing = [n for n in (shared, *downstream) if n not in by_name]
    if missing:
        raise KeyError(f"no executor named {missing} (have {sorted(by_name)})")
    stage0, others = by_name[shared], [by_name[n] for n in downstream]
    slot: GPUSlot
    if mode == "timeslice":
        slot = TimeSliced()
    else:
        from omniplane.perf import ColocationModel

        cfg = stage0.engines[0].cfg
        slot = Colocated(mode, cfg.gpu, cost.efficiency(cfg), colocation or ColocationModel(),
                         shared, lambda ex, step: step.work)
    for ex in (stage0, *others):
        ex.gpu = slot
        if isinstance(slot, TimeSliced):
            slot.join(ex)
        ex.can_span = False  # a policy or the co-location model must see every iteration
        for engine in ex.engines:
            engine.want_work = mode != "timeslice"

    def signals() -> tuple[int, float]:
        return sum(o.outstanding() for o in others), float(getattr(slot, "utilization", 0.0))

    for engine in stage0.engines:
        if isinstance(engine, LLMEngine):
            engine.context_provider = signals
    return slot
