"""The one factory for GPU backends: a name in, a backend out.

``auto`` tries the real backends in order and falls back to the null backend only with the
reasons recorded (``NullStreams.reason`` / ``NullSampler.reason``), so a log line or
``describe()`` always says that nothing is applied and why. Naming a real backend
(``cuda``, ``torch``, ``nvml``) never falls back: it raises :class:`GpuUnavailable`.
"""

from __future__ import annotations

from typing import Literal

from omniplane.gpu.errors import GpuUnavailable
from omniplane.gpu.green import CudaStreams, NullStreams, StreamLadder, TorchStreams
from omniplane.gpu.nvml import NullSampler, NvmlSampler, PressureSampler
from omniplane.sched.ladder import LadderSpec, PartitionRule

StreamsName = Literal["auto", "cuda", "torch", "null"]
SamplerName = Literal["auto", "nvml", "null"]
STREAMS: tuple[str, ...] = ("auto", "cuda", "torch", "null")
SAMPLERS: tuple[str, ...] = ("auto", "nvml", "null")


def make_streams(
    name: str, spec: LadderSpec | None, *, role: str, device: int, total_sms: int, rule: PartitionRule
) -> StreamLadder:
    """The SM ladder backend ``name``; ``total_sms`` and ``rule`` only shape the null ladder (real
    backends read both from the device)."""
    if name == "null":
        return NullStreams(total_sms, rule, spec, role=role, reason="null backend requested")
    if name == "cuda":
        return CudaStreams(spec, role=role, device=device)
    if name == "torch":
        return TorchStreams(spec, role=role, device=device)
    if name == "auto":
        reasons = []
        for make in (CudaStreams, TorchStreams):
            try:
                return make(spec, role=role, device=device)
            except GpuUnavailable as exc:
                reasons.append(str(exc))
        if total_sms < 2 * rule.min_sms:
            raise GpuUnavailable("no GPU (" + "; ".join(reasons) + ") and no SM count for a null ladder")
        return NullStreams(total_sms, rule, spec, role=role, reason="no GPU: " + "; ".join(reasons))
    raise ValueError(f"SM ladder backend {name!r}: expected one of {STREAMS}")


def make_sampler(name: str, *, device: int, min_interval_s: float, now: float = 0.0) -> PressureSampler:
    if name == "null":
        return NullSampler("null sampler requested")
    if name == "nvml":
        return NvmlSampler(device, min_interval_s=min_interval_s, now=now)
    if name == "auto":
        try:
            return NvmlSampler(device, min_interval_s=min_interval_s, now=now)
        except GpuUnavailable as exc:
            return NullSampler(f"no GPU: {exc}")
    raise ValueError(f"pressure sampler {name!r}: expected one of {SAMPLERS}")
