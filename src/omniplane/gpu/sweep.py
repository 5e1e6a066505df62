"""The measurements of HorizonServe's offline preprocessing (section 4.2) on one GPU, through the
GPU backend's SM ladder: the document ``omniplane calibrate`` derives the ladder, ``S_cap``,
``B_sat`` and the SLO table from (:mod:`omniplane.gpu.preprocess`).

A :class:`Bench` runs the model's stages; :func:`measure` drives it over the levels of two
:class:`~omniplane.gpu.green.StreamLadder` (the shared stage's and the downstream stage's
complementary partitions) and the whole GPU:

- **SM sweep** of the shared stage alone: one decode iteration and one prefill chunk at every
  level (its stream) and on the whole GPU (no green context);
- **co-running sweep**: the shared stage's decode at every level while the downstream stage
  decodes on the complement, with the memory-activity signal meanwhile; plus both on the whole
  GPU (the full-allocation regime of section 3.3);
- **solo latencies** per request class: first-response latency of requests run one at a time.

Standard library only (with :mod:`omniplane.sched.ladder`), so ``scripts/gpu_calibrate.py`` runs on
a GPU machine that has torch but not omniplane's dependencies. :class:`FakeBench` gives
deterministic, clearly synthetic latencies for the tests and ``--dry``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

KIND = "omniplane-gpu-calibration"
SOLO_REQUESTS = 20  # assumption: requests per class for the solo p95 (the 19th of 20 sorted)


class Bench(Protocol):
    """One model's stages on one GPU; ``stream`` is a ladder level's stream (None: whole GPU) and
    ``sms`` the SMs it was granted (a real bench times the stream; a fake computes from ``sms``)."""

    @property
    def synthetic(self) -> bool: ...

    @property
    def source(self) -> str: ...

    @property
    def shapes(self) -> Mapping[str, Any]: ...

    def decode_ms(self, stream: Any, sms: int) -> float: ...

    def prefill_ms(self, stream: Any, sms: int) -> float: ...

    def corun(self, stream: Any, sms: int, down_stream: Any, down_sms: int) -> tuple[float, float | None]:
        """(shared-stage decode ms, memory-activity fraction or None) with the downstream stage
        decoding on ``down_stream`` meanwhile."""

    def solo_ms(self, request_type: str, n: int) -> list[float]: ...


def measure(bench: Bench, shared: Any, down: Any, *, model: str, gpu: str | None, device: str,
            types: Mapping[str, str], solo_requests: int = SOLO_REQUESTS,
            log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """The calibration document (module docstring) of ``bench`` over the ladders ``shared`` and
    ``down`` (same levels, complementary roles); ``types`` maps request type to output class."""
    if list(shared.ladder.levels) != list(down.ladder.levels):
        raise ValueError("the shared and downstream ladders must have the same levels")
    lad = shared.ladder
    total = lad.total_sms
    decode, prefill, corun = [], [], []
    for i in range(len(lad.levels)):
        s, d = int(shared.granted[i]), int(down.granted[i])
        st, dst = shared.stream(i), down.stream(i)
        decode.append({"sms": s, "time_ms": round(bench.decode_ms(st, s), 5)})
        prefill.append({"sms": s, "time_ms": round(bench.prefill_ms(st, s), 5)})
        ms, bw = bench.corun(st, s, dst, d)
        corun.append({"sms": s, "down_sms": d, "time_ms": round(ms, 5), "bw_util": _frac(bw)})
        log(f"level {s} SMs (downstream {d}): decode {decode[-1]['time_ms']} ms, co-run {ms:.4g} ms")
    decode.append({"sms": total, "time_ms": round(bench.decode_ms(None, total), 5)})
    prefill.append({"sms": total, "time_ms": round(bench.prefill_ms(None, total), 5)})
    ms, bw = bench.corun(None, total, None, total)
    corun.append({"sms": total, "down_sms": total, "time_ms": round(ms, 5), "bw_util": _frac(bw)})
    solo = {}
    for t in types:
        solo[t] = [round(x, 4) for x in bench.solo_ms(t, solo_requests)]
        log(f"solo {t}: {len(solo[t])} requests")
    rule = lad.rule
    return {
        "kind": KIND,
        "synthetic": bool(bench.synthetic),
        "source": bench.source,
        "model": model,
        "gpu": gpu,
        "device": device,
        "total_sms": total,
        "partition": {"min_sms": rule.min_sms, "align": rule.align, "source": rule.source},
        "backend": {"shared": _desc(shared), "downstream": _desc(down)},
        "shapes": dict(bench.shapes),
        "sweep": {"decode": decode, "prefill": prefill},
        "corun": corun,
        "solo_ms": solo,
    }


def _frac(x: float | None) -> float | None:
    return None if x is None else round(min(1.0, max(0.0, float(x))), 4)


def _desc(streams: Any) -> dict[str, Any]:
    d = streams.describe()
    return {k: d[k] for k in ("backend", "applied", "granted", "read_back", "reason", "caveat") if k in d}


class FakeBench:
    """Deterministic synthetic latencies (NOT measurements) shaped like Figure 4(b): decode
    saturates near ``sat`` of the SMs and degrades towards full allocation; co-running slows the
    shared stage more the larger its share; memory activity grows with it."""

    synthetic = True

    def __init__(self, total_sms: int, types: Mapping[str, str], *, best_ms: float = 4.65,
                 sat: float = 0.55, prefill_ms: float = 30.0) -> None:
        self.total, self.types = total_sms, dict(types)
        self.best, self.sat, self.prefill = best_ms, sat, prefill_ms
        self.shapes: dict[str, Any] = {"fake": True}
        self.source = (f"synthetic: omniplane.gpu.sweep.FakeBench (decode best {best_ms} ms from {sat:.0%} "
                       f"of {total_sms} SMs, degrading towards the whole GPU); NOT measurements")

    def _curve(self, sms: int) -> float:
        x = sms / self.total
        below = 1.0 + 0.25 * max(0.0, self.sat / x - 1.0)
        full = 1.0 + 0.2 * max(0.0, x - 0.8) / 0.2  # +20% at the whole GPU (Fig. 4b: 4.65 -> 5.57 ms)
        return below * full

    def decode_ms(self, stream: Any, sms: int) -> float:
        return self.best * self._curve(sms)

    def prefill_ms(self, stream: Any, sms: int) -> float:
        return self.prefill * max(1.0, 0.9 * self.total / sms) / 0.9 if sms < self.total else self.prefill

    def corun(self, stream: Any, sms: int, down_stream: Any, down_sms: int) -> tuple[float, float | None]:
        x = sms / self.total
        return self.decode_ms(stream, sms) * (1.0 + 0.6 * x * x), 0.5 + 0.45 * x

    def solo_ms(self, request_type: str, n: int) -> list[float]:
        base = 45.0 if self.types.get(request_type) == "text" else 900.0
        base *= 1.0 + 0.1 * (sum(map(ord, request_type)) % 7)
        return [base * (1.0 + 0.2 * math.sin(i * 1.7 + len(request_type)) ** 2) for i in range(n)]
