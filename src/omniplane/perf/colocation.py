"""Co-location: a stage's iteration time on a share of a GPU's SMs, next to a co-running stage
that competes for DRAM bandwidth (HorizonServe section 3.3). Equations: docs/perf.md.

For a stage with per-GPU iteration work ``(F, B, overhead, comm)`` on ``s`` of the GPU's ``S``
SMs, next to a co-runner drawing ``D`` bytes/s::

    t_c   = F / (P x compute x s/S)                   compute scales with the SM share
    p     = s / (knee x S)                            the stage's DRAM request pressure
    q     = D / (BW x memory)                         the co-runner's pressure
    Pi    = p + q
    share = p / max(1, Pi)                            its share of DRAM service
    eta   = exp(-thrash x max(0, Pi - 1)^2)           efficiency lost to over-subscription
    rate  = share x eta / eta_full,  eta_full = exp(-thrash x (1/knee - 1)^2)
    t_m   = B / (BW x memory) / rate
    t     = max(t_c, t_m) + overhead + comm

A memory-bound stage therefore saturates at ``knee x S`` SMs and slows down beyond it (more
SMs only add requests the DRAM cannot serve); a co-runner adds pressure, and the penalty grows
sharply once total pressure exceeds what the DRAM serves. ``P``, ``BW``, ``compute`` and
``memory`` are the GPU's peaks and the roofline's efficiency factors, which were fitted on whole
GPUs: ``eta_full`` normalises the model so that a stage alone on all SMs takes exactly the
roofline's time (:class:`~omniplane.perf.costmodel.CostModel` and this model agree there).

The DRAM busy fraction a stage causes is ``u = min(1, t_m / t)``, the share of its iteration
spent in its memory phase; the utilisation signal the HorizonServe controller reads (NVML
"memory utilisation", the fraction of time device memory is being read or written) is
``1 - (1 - u) (1 - min(1, q))`` for independent phases of the two stages.

Calibrated by default to HorizonServe's Figure 4 (RTX 6000 Ada, Qwen2.5-Omni thinker) through
:func:`fit_colocation`; a fixed-SM sweep from a real GPU (:class:`Sweep`) recalibrates it. The
parameters are fractions of the GPU (``knee`` of its SMs), so the model predicts every GPU kind.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from omniplane.perf.factors import Calibration, Efficiency, load_calibration
from omniplane.perf.types import Work
from omniplane.spec import GPUKind


@dataclass(frozen=True)
class ColocationParams:
    """``knee``: fraction of the SMs at which a memory-bound stage saturates DRAM;
    ``thrash``: loss of DRAM efficiency per squared unit of over-subscription."""

    knee: float
    thrash: float
    source: str = "assumption: unfitted"
    fitted_to: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 < self.knee <= 1.0:
            raise ValueError(f"ColocationParams.knee must be in (0, 1], got {self.knee}")
        if self.thrash < 0.0:
            raise ValueError(f"ColocationParams.thrash must be >= 0, got {self.thrash}")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["fitted_to"] = list(self.fitted_to)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any], file: str = "<colocation>") -> ColocationParams:
        try:
            return cls(float(d["knee"]), float(d["thrash"]), str(d.get("source", "")),
                       tuple(d.get("fitted_to", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{file}: expected knee and thrash numbers: {exc}") from None


@dataclass(frozen=True)
class StageTiming:
    """One stage's iteration under co-location."""

    time_s: float
    bandwidth: float  # bytes/s this stage achieves (its bytes over its iteration time)
    busy: float  # DRAM busy fraction this stage causes
    utilization: float  # DRAM busy fraction with the co-runner (the controller's signal)
    memory_slowdown: float  # memory phase time over its ideal at full effective bandwidth


class ColocationModel:
    """Stage iteration times under an SM share and a co-runner's bandwidth demand.

    ``params`` default to the shipped calibration (``perf/data/colocation.json``); the
    efficiency factors of a GPU kind come from ``calibration`` (the shipped one by default)
    unless a call passes ``eff``.
    """

    def __init__(self, params: ColocationParams | None = None,
                 calibration: Calibration | None = None) -> None:
        self.params = params or load_colocation()
        self._calibration = calibration

    @property
    def params(self) -> ColocationParams:
        return self._params

    @params.setter
    def params(self, value: ColocationParams) -> None:
        self._params = value
        self._full_excess = max(0.0, 1.0 / value.knee - 1.0) ** 2  # over-subscription alone on all SMs

    def efficiency(self, gpu: GPUKind) -> Efficiency:
        if self._calibration is None:
            self._calibration = load_calibration()
        return self._calibration.for_gpu(gpu)

    def stage(self, work: Work, gpu: GPUKind, sms: float, corun_bw: float = 0.0, *,
              eff: Efficiency | None = None) -> StageTiming:
        """``work`` (per GPU) on ``sms`` of ``gpu.sms`` SMs next to a co-runner drawing
        ``corun_bw`` bytes/s (see :meth:`demand`)."""
        eff = eff or self.efficiency(gpu)
        total = gpu.sms
        s = min(max(sms, 1.0), float(total))
        cap_bw = gpu.mem_bw * eff.memory
        t_c = work.flops / (gpu.flops * eff.compute * s / total) if work.flops else 0.0
        p = s / (self.params.knee * total)
        q = max(corun_bw, 0.0) / cap_bw
        pi = p + q
        share = p / max(1.0, pi)
        eta = math.exp(-self.params.thrash * (max(0.0, pi - 1.0) ** 2 - self._full_excess))
        ideal = work.bytes / cap_bw
        t_m = ideal / (share * eta) if work.bytes else 0.0
        t = max(t_c, t_m) + work.overhead_s + work.comm_s
        busy = min(1.0, t_m / t) if t > 0 else 0.0
        util = 1.0 - (1.0 - busy) * (1.0 - min(1.0, q))
        return StageTiming(t, work.bytes / t if t > 0 else 0.0, busy, util,
                           t_m / ideal if ideal > 0 else 1.0)

    def demand(self, work: Work, gpu: GPUKind, sms: float, *, eff: Efficiency | None = None) -> float:
        """Bytes/s a stage draws running alone on ``sms`` SMs (its co-runner's ``corun_bw``)."""
        return self.stage(work, gpu, sms, eff=eff).bandwidth

    def pair(self, a: Work, sms_a: float, b: Work, sms_b: float, gpu: GPUKind, *,
             eff: Efficiency | None = None, rounds: int = 20) -> tuple[StageTiming, StageTiming]:
        """Two stages co-running: each one's demand is the other's co-runner bandwidth; solved by
        fixed-point iteration from their solo demands."""
        eff = eff or self.efficiency(gpu)
        ta, tb = self.stage(a, gpu, sms_a, eff=eff), self.stage(b, gpu, sms_b, eff=eff)
        for _ in range(rounds):
            na = self.stage(a, gpu, sms_a, tb.bandwidth, eff=eff)
            nb = self.stage(b, gpu, sms_b, ta.bandwidth, eff=eff)
            done = (abs(na.time_s - ta.time_s) <= 1e-9 * ta.time_s
                    and abs(nb.time_s - tb.time_s) <= 1e-9 * tb.time_s)
            ta, tb = na, nb
            if done:
                break
        return ta, tb


def default_colocation_path() -> Path:
    return Path(str(files("omniplane.perf") / "data" / "colocation.json"))


def load_colocation(path: Path | None = None) -> ColocationParams:
    p = path or default_colocation_path()
    data = json.loads(p.read_text())
    return ColocationParams.from_json(data["params"], str(p))
