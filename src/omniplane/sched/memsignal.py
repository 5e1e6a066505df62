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

Window. NVML reports the fraction over "the past sample period", which "may be between 1 second
and 1/6 second depending on the product" (nvidia-smi's ``utilization.memory``); HorizonServe
reads it at scheduling-step boundaries (section 5). With a ``clock`` (the simulation's), the
signal is that: the time average over the past ``window_s`` seconds of ``1 - prod_j (1 - a_j)``
over the steps ``j`` in flight at each instant (0 while no stage runs), each step taken to run
from its start for the time the co-location model priced it at. ``window_s`` defaults to
:data:`NVML_SAMPLE_PERIOD_S` = 1/6 s, the short end of NVML's range (assumption: NVML does not say
which period an RTX 6000 Ada or RTX PRO 6000 uses; docs/results/sched.md measures both ends).
Without a clock the window is the step that starts (the co-runner's current step with it), the
one-step signal (docs/decisions/0104-one-step-memory-signal.md). Either way the controller's EWMA
(gamma = 0.4) smooths it across steps.
Nothing here is fitted: the per-step overheads are the ``vllm`` runtime's
(``omniplane.perf.runtime``), the kernel times the co-location model's.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from omniplane.perf import ColocationModel
from omniplane.perf.colocation import StageTiming
from omniplane.perf.types import Work
from omniplane.spec import GPUKind

_RECENT = 64  # steps whose draw a co-runner may still be reporting (two stages: one or two)
# assumption: the short end of NVML's documented sample period, "between 1 second and 1/6 second
# depending on the product" (nvidia-smi --help-query-gpu, utilization.memory)
NVML_SAMPLE_PERIOD_S = 1.0 / 6.0


def active_fraction(work: Work, timing: StageTiming) -> float:
    """Fraction of a step's time its kernels run (the rest is the runtime's CPU overhead)."""
    t = timing.time_s
    if t <= 0.0:
        return 0.0
    return min(1.0, max(0.0, t - work.overhead_s - work.comm_s) / t)


class MemoryActivity:
    """A co-location model whose ``utilization`` is the NVML-style memory-activity fraction
    (module docstring); every other quantity is the wrapped model's, unchanged."""

    def __init__(self, inner: ColocationModel | None = None, *, window_s: float = NVML_SAMPLE_PERIOD_S,
                 clock: Callable[[], float] | None = None) -> None:
        """``clock`` (the simulation's time) turns on the windowed signal over ``window_s``."""
        if not window_s > 0.0:
            raise ValueError(f"MemoryActivity.window_s must be > 0 seconds, got {window_s}")
        self.inner = inner or ColocationModel()
        self.window_s = float(window_s)
        self.clock = clock
        # the draw (bytes/s) of recent steps -> their active fraction: the GPU slot passes a
        # co-runner's draw, the value this wrapper returned for the co-runner's step
        self._active_by_draw: OrderedDict[float, float] = OrderedDict()
        self._steps: deque[tuple[float, float, float]] = deque()  # (start, end, active fraction)
        self._t0: float | None = None  # the first step's start

    def windowed(self, now: float) -> float:
        """The memory-active time fraction over ``[now - window_s, now]`` (module docstring)."""
        t0 = self._t0
        if t0 is None or now <= t0:
            return 0.0
        lo = max(t0, now - self.window_s)
        steps = self._steps
        while steps and steps[0][1] <= lo:
            steps.popleft()
        events: list[tuple[float, int, float]] = []
        for start, end, a in steps:
            if end > lo and start < now:
                events.append((max(start, lo), 1, 1.0 - a))
                events.append((min(end, now), -1, 1.0 - a))
        events.sort()
        busy, prod, zeros, t = 0.0, 1.0, 0, lo
        for when, kind, idle in events:
            if when > t:
                busy += (when - t) * (1.0 if zeros else 1.0 - prod)
                t = when
            if idle <= 0.0:
                zeros += kind
            elif kind > 0:
                prod *= idle
            else:
                prod /= idle
        # after the last event no step is in flight (each end is clipped to ``now``): adds 0
        return min(1.0, max(0.0, busy / (now - lo)))

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
        if self.clock is not None:  # NVML's past-window fraction, then this step joins the record
            now = float(self.clock())
            value = self.windowed(now)
            if self._t0 is None:
                self._t0 = now
            self._steps.append((now, now + float(timing.time_s), own))
            return replace(timing, utilization=value)
        other = self.co_runner_active(corun_bw, gpu)
        recent = self._active_by_draw
        recent[timing.bandwidth] = own
        recent.move_to_end(timing.bandwidth)
        while len(recent) > _RECENT:
            recent.popitem(last=False)
        return replace(timing, utilization=1.0 - (1.0 - own) * (1.0 - other))
