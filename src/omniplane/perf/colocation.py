"""Co-location: a stage's iteration time on a share of a GPU's SMs, next to a co-running stage
that competes for DRAM bandwidth (and, under MPS, for compute) (HorizonServe section 3.3).
Equations: docs/reference/perf.md, "Co-location".

For a stage with per-GPU iteration work ``(F, B, overhead, comm)`` on ``s`` of the GPU's ``S``
SMs (``x = s / S``)::

    C      = BW x eta_max                                   what the DRAM serves at most
    d(x)   = BW x m_peak x (1 - exp(-x / kappa))            bandwidth the stage can pull
    psi(x) = 1 + delta x clip((x - x0) / (x1 - x0), 0, 1)   over-subscription slowdown
    alone:      bw = min(d, C) / psi
    co-running: bw = min(d, C - D)     / psi   (D: the co-runner's draw, first come)
                bw = C d / (d + d_o)   / psi   (d_o: the co-runner's demand, fair share)
                                                when d + D (or d + d_o) exceeds C
    t_m    = B / bw
    t_c    = F / (P x compute x x - corun_flops)            SMs partition compute; under MPS
                                                            the co-runner's FLOP/s are shared
    t      = max(t_c, t_m) + overhead + comm

``m_peak = memory x psi(1)`` makes a stage alone on every SM take exactly the roofline's time
(``memory`` is the kind's fitted fraction of peak bandwidth, so the cost model and this model
agree there), capped at ``eta_max``. By construction:

* no stage, alone or co-running, moves data faster than ``C = BW x eta_max < BW``, and the two
  co-running stages together never exceed it;
* no stage computes faster than its SMs' share of peak FLOP/s;
* a stage alone is never slower on all SMs than on its best share by more than ``1 + delta``,
  and ``delta`` is bounded by HorizonServe's measured 120/80-SM ratio (5.57 / 4.65 - 1);
* fewer SMs never make a stage faster except through that bounded penalty.

The utilisation signal the HorizonServe controller reads is the GPU's total DRAM draw over its
peak (GPM DRAM bandwidth utilisation): ``(B / t + D) / BW``.

Calibrated to HorizonServe's Figure 4 (RTX 6000 Ada, Qwen2.5-Omni thinker) through
:func:`~omniplane.perf.colocation_fit.fit_colocation`; a fixed-SM sweep from a real GPU
recalibrates it. The parameters are fractions of the GPU, so the model predicts every GPU kind
(an assumption until that GPU's sweep replaces them).
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

# HorizonServe Figure 4(b): decode TPOT 4.65 ms at 80 SMs, 5.57 ms at 120 (RTX 6000 Ada, alone):
# the largest solo slowdown of more SMs the paper measured, and the bound on ``delta``.
MAX_SOLO_PENALTY = 5.57 / 4.65 - 1.0
MIN_COMPUTE_SHARE = 0.05  # under MPS a stage keeps at least this share of its SMs' FLOP/s


@dataclass(frozen=True)
class ColocationParams:
    """``kappa``: SM fraction scale at which a memory-bound stage's bandwidth saturates;
    ``delta``: largest slowdown of more SMs than useful (<= MAX_SOLO_PENALTY); ``x0`` / ``x1``:
    SM fractions where that slowdown starts and where it is complete; ``eta_max``: largest
    fraction of peak DRAM bandwidth the GPU serves (both stages together)."""

    kappa: float
    delta: float
    x0: float
    x1: float
    eta_max: float
    source: str = "assumption: unfitted"
    fitted_to: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 < self.kappa <= 1.0:
            raise ValueError(f"ColocationParams.kappa must be in (0, 1], got {self.kappa}")
        if not 0.0 <= self.delta <= MAX_SOLO_PENALTY + 1e-9:
            raise ValueError(f"ColocationParams.delta must be in [0, {MAX_SOLO_PENALTY:.3f}] (HorizonServe's "
                             f"measured 120/80-SM ratio bounds it), got {self.delta}")
        if not 0.0 < self.x0 < self.x1 <= 1.0:
            raise ValueError(f"ColocationParams: need 0 < x0 < x1 <= 1, got x0={self.x0}, x1={self.x1}")
        if not 0.0 < self.eta_max < 1.0:
            raise ValueError(f"ColocationParams.eta_max must be in (0, 1), got {self.eta_max}")

    @property
    def knee(self) -> float:
        """Fraction of the SMs at which a memory-bound stage alone is fastest (``x0``)."""
        return self.x0

    def penalty(self, x: float) -> float:
        return 1.0 + self.delta * min(max((x - self.x0) / (self.x1 - self.x0), 0.0), 1.0)

    def pull(self, x: float) -> float:
        """SM-limited bandwidth as a fraction of the saturated one."""
        return 1.0 - math.exp(-x / self.kappa)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["fitted_to"] = list(self.fitted_to)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any], file: str = "<colocation>") -> ColocationParams:
        try:
            return cls(float(d["kappa"]), float(d["delta"]), float(d["x0"]), float(d["x1"]),
                       float(d["eta_max"]), str(d.get("source", "")), tuple(d.get("fitted_to", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{file}: params: expected kappa, delta, x0, x1, eta_max numbers: "
                             f"{exc}") from None


@dataclass(frozen=True)
class StageTiming:
    """One stage's iteration under co-location."""

    time_s: float
    bandwidth: float  # bytes/s this stage draws on average (its bytes over its iteration time)
    busy: float  # fraction of the iteration in its memory phase
    utilization: float  # the GPU's DRAM draw over peak, this stage and the co-runner
    memory_slowdown: float  # memory phase time over its time alone on the whole GPU
    demand: float = 0.0  # bytes/s its memory phase would pull alone on its SMs (uncontended)
    flops_rate: float = 0.0  # FLOP/s it draws on average


class ColocationModel:
    """Stage iteration times under an SM share and a co-runner's bandwidth (and compute) draw.

    ``params`` default to the shipped calibration (``perf/data/colocation.json``); the
    efficiency factors of a GPU kind come from ``calibration`` (the shipped one by default)
    unless a call passes ``eff``.
    """

    def __init__(self, params: ColocationParams | None = None,
                 calibration: Calibration | None = None) -> None:
        self.params = params or load_colocation()
        self._calibration = calibration

    def efficiency(self, gpu: GPUKind) -> Efficiency:
        if self._calibration is None:
            self._calibration = load_calibration()
        return self._calibration.for_gpu(gpu)

    def capacity(self, gpu: GPUKind) -> float:
        """Bytes/s the GPU's DRAM serves at most, to all stages together."""
        return gpu.mem_bw * self.params.eta_max

    def _pull(self, gpu: GPUKind, eff: Efficiency, x: float) -> float:
        p = self.params
        m_peak = min(eff.memory * p.penalty(1.0) / p.pull(1.0), p.eta_max)
        return gpu.mem_bw * m_peak * p.pull(x)

    def stage(self, work: Work, gpu: GPUKind, sms: float, corun_bw: float = 0.0, *,
              eff: Efficiency | None = None, corun_flops: float = 0.0) -> StageTiming:
        """``work`` (per GPU) on ``sms`` of ``gpu.sms`` SMs next to a co-runner that draws
        ``corun_bw`` bytes/s (and, sharing the same SMs under MPS, ``corun_flops`` FLOP/s).

        When the two together ask for more than the DRAM serves, each gets a share in
        proportion to what it asks (likewise compute under MPS). :meth:`pair` passes each stage
        the other's uncontended demand, so the pair never exceeds the GPU; the simulator's
        co-located GPU (:class:`omniplane.sim.gpu.Colocated`) does the same for the stages in
        their GPU phases and re-times the steps in flight whenever that set changes."""
        eff = eff or self.efficiency(gpu)
        p = self.params
        x = min(max(sms, 1.0), float(gpu.sms)) / gpu.sms
        cap = self.capacity(gpu)
        d = min(self._pull(gpu, eff, x), cap)
        other = max(corun_bw, 0.0)
        avail = cap * d / (d + other) if d + other > cap else d
        bw_mem = avail / p.penalty(x)
        flops_cap = gpu.flops * eff.compute * x
        f_alone = self._flops_demand(work, bw_mem, flops_cap)
        rate = flops_cap
        if corun_flops > 0 and f_alone + corun_flops > flops_cap:
            rate = flops_cap * f_alone / (f_alone + corun_flops)
        t_c = work.flops / rate if work.flops else 0.0
        t_m = work.bytes / bw_mem if work.bytes else 0.0
        t = max(t_c, t_m) + work.overhead_s + work.comm_s
        draw = work.bytes / t if t > 0 else 0.0
        ideal = work.bytes / (gpu.mem_bw * eff.memory) if work.bytes else 0.0
        seen = min(other, cap - min(avail, cap)) if d + other > cap else other
        return StageTiming(t, draw, min(1.0, t_m / t) if t > 0 else 0.0,
                           min(1.0, (draw + seen) / gpu.mem_bw),
                           t_m / ideal if ideal > 0 else 1.0, d / p.penalty(x),
                           work.flops / t if t > 0 else 0.0)

    @staticmethod
    def _flops_demand(work: Work, bw: float, flops_cap: float) -> float:
        """FLOP/s the stage draws on its SMs uncontended (its FLOPs over its time alone)."""
        if not work.flops:
            return 0.0
        t = max(work.flops / flops_cap, work.bytes / bw if bw > 0 else 0.0) + work.overhead_s + work.comm_s
        return work.flops / t

    def demand(self, work: Work, gpu: GPUKind, sms: float, *, eff: Efficiency | None = None) -> float:
        """Bytes/s a stage draws running alone on ``sms`` SMs (a co-runner's ``corun_bw``)."""
        return self.stage(work, gpu, sms, eff=eff).bandwidth

    def pair(self, a: Work, sms_a: float, b: Work, sms_b: float, gpu: GPUKind, *,
             eff: Efficiency | None = None, mps: bool = False) -> tuple[StageTiming, StageTiming]:
        """Two stages co-running, each told the other's uncontended demand: DRAM (and, with
        ``mps``, compute on the same SMs) shared in proportion to demand."""
        eff = eff or self.efficiency(gpu)
        sa, sb = self.stage(a, gpu, sms_a, eff=eff), self.stage(b, gpu, sms_b, eff=eff)
        fa = fb = 0.0
        if mps:
            fa, fb = sa.flops_rate, sb.flops_rate
        return (self.stage(a, gpu, sms_a, sb.demand if b.bytes else 0.0, eff=eff, corun_flops=fb),
                self.stage(b, gpu, sms_b, sa.demand if a.bytes else 0.0, eff=eff, corun_flops=fa))


def default_colocation_path() -> Path:
    return Path(str(files("omniplane.perf") / "data" / "colocation.json"))


def load_colocation(path: Path | None = None) -> ColocationParams:
    p = path or default_colocation_path()
    data = json.loads(p.read_text())
    return ColocationParams.from_json(data["params"], str(p))
