"""An NVML-style memory-activity signal for the simulated testbed (HorizonServe 4.4, Figure 4(a)).

HorizonServe reads "the normalized GPU memory-activity signal from PyNVML" (section 4.4), i.e.
``nvmlDeviceGetUtilizationRates().memory``: the percent of time over the past sample period
during which device memory was being read or written (NVML API reference,
``nvmlUtilization_t.memory``). That is a *time* fraction, not a bandwidth fraction: a decode
kernel that streams weights at half the peak rate counts as fully busy. The co-location model's
own signal (``StageTiming.utilization``) is the GPM-style DRAM bandwidth over peak, which reads
0.53 for the thinker's decode alone on RTX 6000 Ada where the paper's NVML trace reads 0.76.

:class:`MemoryActivity` wraps a co-location model and replaces that signal with the
NVML-style one, from quantities the model already computes for each step:

* a stage's step has its kernels running for ``max(t_c, t_m)`` of its ``t = max(t_c, t_m) +
  overhead + comm`` (the runtime's per-step CPU overhead leaves the GPU idle), so its memory is
  active for the fraction ``a = max(t_c, t_m) / t`` of the step;
* with a co-runner whose steps are active for ``a_o``, memory is active whenever either stage's
  kernels run; the two stages' step phases are independent, so ``B = 1 - (1 - a)(1 - a_o)``.

Window: the step that starts (the sample is taken at scheduling-step boundaries, section 5, and
covers the iteration about to run, with the co-runner's current step); the controller's EWMA
(gamma = 0.4) smooths it across steps. Nothing here is fitted: the per-step overheads are the
``vllm`` runtime's (``omniplane.perf.runtime``), the kernel times the co-location model's.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from typing import Any

from omniplane.perf import ColocationModel
from omniplane.perf.colocation import StageTiming
from omniplane.perf.types import Work
from omniplane.spec import GPUKind

_RECENT = 64  # steps whose draw a co-runner may still be reporting (two stages: one or two)


def active_fraction(work: Work, timing: StageTiming) -> float:
    """Fraction of a step's time its kernels run (the rest is the runtime's CPU overhead)."""
    t = timing.time_s
    if t <= 0.0:
        return 0.0
    return min(1.0, max(0.0, t - work.overhead_s - work.comm_s) / t)


class MemoryActivity:
    """A co-location model whose ``utilization`` is the NVML-style memory-activity fraction
    (module docstring); every other quantity is the wrapped model's, unchanged."""

    def __init__(self, inner: ColocationModel | None = None) -> None:
        self.inner = inner or ColocationModel()
        # the draw (bytes/s) of recent steps -> their active fraction: the GPU slot passes a
        # co-runner's draw, the value this wrapper returned for the co-runner's step
        self._active_by_draw: OrderedDict[float, float] = OrderedDict()

    def __getattr__(self, name: str) -> Any:  # capacity, demand, pair, efficiency, params
        return getattr(self.inner, name)

    def co_runner_active(self, corun_bw: float, gpu: GPUKind) -> float:
        """The co-runner's active fraction, known from its step's draw; a draw this wrapper
        did not return (several co-runners summed) falls back to the draw over peak."""
        if corun_bw <= 0.0:
            return 0.0
        known = self._active_by_draw.get(corun_bw)
        if known is not None:
            return known
        return min(1.0, corun_bw / gpu.mem_bw)

    def stage(self, work: Work, gpu: GPUKind, sms: float, corun_bw: float = 0.0, *,
              eff: Any = None, corun_flops: float = 0.0) -> StageTiming:
        timing = self.inner.stage(work, gpu, sms, corun_bw, eff=eff, corun_flops=corun_flops)
        own = active_fraction(work, timing)
        other = self.co_runner_active(corun_bw, gpu)
        recent = self._active_by_draw
        recent[timing.bandwidth] = own
        recent.move_to_end(timing.bandwidth)
        while len(recent) > _RECENT:
            recent.popitem(last=False)
        return replace(timing, utilization=1.0 - (1.0 - own) * (1.0 - other))
