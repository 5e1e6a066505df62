"""The fixed-SM sweep's rules (HorizonServe section 4.2): ``S_cap``, ``S_min``, the ladder between
them, and the static-cap baseline's cap from the same sweep. Standard library only (with
:mod:`omniplane.sched.ladder`), so a GPU machine without omniplane's dependencies
(``scripts/gpu_calibrate.py``) applies the same rules as the offline calibration
(:mod:`omniplane.sched.calibration`) and ``omniplane calibrate``.
"""

from __future__ import annotations

from dataclasses import dataclass

from omniplane.sched.ladder import Ladder, LadderSpec, PartitionRule, build_ladder

SCAP_TOLERANCE = 0.05  # assumption: "near-best" decode TPOT (Fig. 4b: 64 SMs within 3.2% of the best)
# assumption: the ladder's bottom keeps the shared stage's decode within 10% of its best (the
# paper's Table 3 claims throttling leaves shared-stage TPOT unchanged; the bound is 10%)
S_MIN_SLOWDOWN = 0.10
S_MIN_FRACTION = 0.40  # assumption (legacy rule, ``s_min_rule="fraction"``): Figure 7 draws 40% of SMs
# assumption: the static-cap baseline's capacity target (SGLang-Omni picks its cap from a
# one-sided capacity curve; the fraction it targets is ours)
CAPACITY_FRACTION = 0.95
LADDER_LEVELS = 4  # assumption: the paper does not give the ladder's size


@dataclass(frozen=True)
class SweepPoint:
    sms: int
    time_s: float  # the shared stage's decode iteration time on ``sms`` SMs, alone


def choose_s_cap(points: tuple[SweepPoint, ...], tolerance: float = SCAP_TOLERANCE) -> int:
    """The smallest SM count within ``tolerance`` of the sweep's best decode time."""
    if not points:
        raise ValueError("choose_s_cap needs a non-empty sweep")
    if not tolerance >= 0.0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    best = min(p.time_s for p in points)
    return min(p.sms for p in points if p.time_s <= (1.0 + tolerance) * best)


def capacity_cap(points: tuple[SweepPoint, ...], fraction: float = CAPACITY_FRACTION) -> int:
    """The static-cap baseline's SM cap (one-sided capacity curve, after SGLang-Omni): the smallest
    swept SM count whose decode throughput (1 / iteration time) reaches ``fraction`` of the
    throughput at the sweep's largest count (the uncapped stage). The sweep's counts are the GPU's
    partition sizes (groups of 8 SMs on H100/H200)."""
    if not points:
        raise ValueError("capacity_cap needs a non-empty sweep")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    full = max(points, key=lambda p: p.sms).time_s
    return min(p.sms for p in points if fraction * p.time_s <= full)


def choose_s_min(points: tuple[SweepPoint, ...], slowdown: float = S_MIN_SLOWDOWN) -> int:
    """The fewest SMs at which the sweep's decode time stays within ``slowdown`` of its best."""
    if not slowdown >= 0.0:
        raise ValueError(f"slowdown must be >= 0, got {slowdown}")
    return choose_s_cap(points, slowdown)


def calibrated_ladder(total_sms: int, s_cap: int, rule: PartitionRule, *, levels: int = LADDER_LEVELS,
                      s_min: int | None = None) -> Ladder:
    """``levels`` partitions evenly spaced in ``[S_min, S_cap]`` (S_min: given, normally
    :func:`choose_s_min` of the sweep; without one, 40% of the SMs rounded down to the alignment;
    it collapses onto S_cap when above it), built by the one ladder builder
    (:func:`omniplane.sched.ladder.build_ladder`)."""
    cap = rule.snap_down(s_cap)
    lo = rule.snap_down(round(S_MIN_FRACTION * total_sms) if s_min is None else s_min)
    return build_ladder(total_sms, rule, LadderSpec(s_min=min(lo, cap), s_max=cap, count=levels))


def sweep_ladder(points: tuple[SweepPoint, ...], total_sms: int, rule: PartitionRule, *,
                 tolerance: float = SCAP_TOLERANCE, slowdown: float = S_MIN_SLOWDOWN,
                 levels: int = LADDER_LEVELS) -> Ladder:
    """The ladder of a fixed-SM sweep: S_cap (:func:`choose_s_cap`) and S_min
    (:func:`choose_s_min`, at least as tolerant as S_cap's bound) of the same points. The one rule
    for the simulated and the deployed ladder (``omniplane calibrate``, :mod:`omniplane.gpu.calibrate`)."""
    s_cap = choose_s_cap(points, tolerance)
    s_min = choose_s_min(points, max(slowdown, tolerance))
    return calibrated_ladder(total_sms, s_cap, rule, levels=levels, s_min=s_min)
