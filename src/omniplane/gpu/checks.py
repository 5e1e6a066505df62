"""Fail closed: the checks a process runs before it throttles SMs, and the state it exposes.

SM throttling acts only when every check passed; any failure turns it off in that process with
one warning line and :class:`ThrottleState` (``enabled``, ``reason``, the counter
``disabled_total``), and the temporal scheduler (rotation, slack guard, long-path cap) goes on.

- **SM levels, per launching thread** (the worker; vLLM issues a step's kernels from more than
  one thread, e.g. ``execute_model`` and ``sample_tokens``): on each thread, before its first
  capped launch, every ladder level's stream must belong to that level's green context
  (``StreamLadder.check_level``: the driver's ``cuStreamGetCtx`` against ``cuCtxFromGreenCtx``
  for cuda-bindings), become the current stream on that thread, and run a BF16 matrix product
  whose result matches a float32 reference (:func:`torch_matmul_probe`).
- **Memory-activity signal** (the shared stage's scheduler): the sampler must return a fraction
  in [0, 1] (:func:`check_signal`); a null sampler (no GPU) fails with its reason.
- A null SM-ladder backend (``auto`` on a machine without a usable GPU) fails with its reason.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("omniplane.gpu")

# assumption: 8x BF16's unit roundoff (2^-8, 8 significand bits) over the result's largest
# magnitude; a product on the wrong SMs or a failed launch is off by far more (or NaN)
BF16_TOLERANCE = 8 * 2.0**-8
PROBE_SIZE = 256  # assumption: a product big enough to occupy every SM of a small level


class CheckFailed(RuntimeError):
    def __init__(self, check: str, reason: str) -> None:
        super().__init__(f"{check}: {reason}")
        self.check, self.reason = check, reason


@dataclass
class ThrottleState:
    """Whether this process applies SM caps; ``disabled_total`` counts the checks that turned it off."""

    enabled: bool = True
    check: str = ""
    reason: str = ""
    disabled_total: int = 0
    passed: list[str] = field(default_factory=list)

    def disable(self, who: str, check: str, reason: str, *, quiet: bool = False) -> None:
        """Turn throttling off (one warning line naming the check and the reason)."""
        if self.enabled and not quiet:
            log.warning("%s: SM throttling disabled: %s: %s; the temporal scheduler goes on without SM caps",
                        who, check, reason)
        self.enabled, self.check, self.reason = False, check, reason
        self.disabled_total += 1

    def to_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "check": self.check, "reason": self.reason,
                "disabled_total": self.disabled_total, "passed": list(self.passed)}


Probe = Callable[[Any, int, int], None]  # (level stream, level, device): raises CheckFailed


def torch_matmul_probe(stream: Any, level: int, device: int) -> None:
    """A BF16 product on ``stream`` from the calling thread, against a float32 reference."""
    import torch

    name = f"BF16 matmul at level {level}"
    gen = torch.Generator().manual_seed(level)
    a = torch.randn(PROBE_SIZE, PROBE_SIZE, generator=gen).to(torch.bfloat16)
    b = torch.randn(PROBE_SIZE, PROBE_SIZE, generator=gen).to(torch.bfloat16)
    ref = a.float() @ b.float()
    a_d, b_d = a.to(f"cuda:{device}"), b.to(f"cuda:{device}")
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        if torch.cuda.current_stream(device) != stream:
            raise CheckFailed(f"SM level {level} context", "its stream is not current on this thread")
        c = a_d @ b_d
    stream.synchronize()
    err = float((c.float().cpu() - ref).abs().max()) / max(float(ref.abs().max()), 1e-30)
    if not math.isfinite(err) or err > BF16_TOLERANCE:
        raise CheckFailed(name, f"max error {err:.3g} of the result's scale (tolerance {BF16_TOLERANCE:.3g})")


def verify_levels(streams: Any, probe: Probe, device: int) -> list[str]:
    """Every level's context check and probe on the calling thread; CheckFailed on the first failure."""
    if getattr(streams, "backend", "null") == "null":
        raise CheckFailed("GPU backend", getattr(streams, "reason", "null backend: nothing can be applied"))
    passed = []
    for level in range(len(streams.ladder.levels)):
        try:
            streams.check_level(level)
        except CheckFailed:
            raise
        except Exception as exc:  # a driver error is a failed check, not a crash
            raise CheckFailed(f"SM level {level} context", str(exc)) from None
        try:
            probe(streams.stream(level), level, device)
        except CheckFailed:
            raise
        except Exception as exc:
            raise CheckFailed(f"BF16 matmul at level {level}", f"{type(exc).__name__}: {exc}") from None
        passed.append(f"level {level} ({streams.granted[level]} SMs)")
    return passed


def check_signal(sampler: Any, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> float:
    """One memory-activity reading in [0, 1] (waiting one sampling interval if the first gives
    none, as GPM's two-sample metric does); CheckFailed otherwise."""
    what = "memory-activity signal"
    if getattr(sampler, "source", "null") == "null":
        raise CheckFailed(what, getattr(sampler, "reason", "null sampler"))
    try:
        value = sampler.sample(clock())
        if value is None:
            sleep(float(getattr(sampler, "interval", 0.1)))
            value = sampler.sample(clock())
    except Exception as exc:
        raise CheckFailed(what, f"{sampler.source}: {type(exc).__name__}: {exc}") from None
    if value is None or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise CheckFailed(what, f"{sampler.source} read {value!r}, not a fraction in [0, 1]")
    return float(value)
