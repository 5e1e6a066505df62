"""The SM ladder: the SM counts the shared stage may be capped to, valid for a GPU architecture.

One builder (:func:`build_ladder`) serves the offline calibration (HorizonServe section 4.2,
``omniplane.sched.calibration``), the spatial controller that picks a level every step
(``omniplane.sched.spatial``) and the GPU backends that realise a level as a CUDA green context
(``omniplane.gpu``), so the simulated and the deployed policy cap on the same levels.

A green-context partition has a minimum size and an alignment that depend on the compute
architecture. The driver reports both at run time (``minSmPartitionSize`` and
``smCoscheduledAlignment`` of the device's SM resource, CUDA 13); :data:`PARTITION_RULES` is the
guideline the CUDA driver API documentation gives when those fields are not available.

The shared stage's co-running levels run from ``S_min`` to ``S_cap`` (section 4.4); the
aggressive cap ``S_aggr`` (no downstream stage active) is above them, by default the whole GPU.
The downstream stage holds the complementary share ``total - s`` for every level ``s``, so the
two always sum to the GPU's SM count, and every level leaves the other stage at least one
minimum partition. Pure arithmetic, standard library only: no GPU, no omniplane import.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

RULES_SOURCE = (
    "https://docs.nvidia.com/cuda/archive/12.4.0/cuda-driver-api/group__CUDA__GREEN__CONTEXTS.html "
    "(cuDevSmResourceSplitByCount guideline per compute architecture)"
)


@dataclass(frozen=True)
class PartitionRule:
    """Smallest partition and the multiple every partition size must be."""

    min_sms: int
    align: int
    source: str = RULES_SOURCE

    def __post_init__(self) -> None:
        if self.min_sms < 1 or self.align < 1:
            raise ValueError(
                f"PartitionRule: min_sms and align must be >= 1, got {self.min_sms}, {self.align}"
            )

    def snap_up(self, sms: int) -> int:
        """What the driver grants for a request of ``sms``: at least the minimum, rounded up
        to the alignment (cuDevSmResourceSplitByCount rounds minCount up)."""
        s = max(sms, self.min_sms)
        return -(-s // self.align) * self.align

    def snap_down(self, sms: int) -> int:
        """The largest aligned count not above ``sms`` (at least the minimum, rounded up)."""
        return max(self.snap_up(self.min_sms), sms - sms % self.align)

    def valid(self, sms: int) -> bool:
        return sms >= self.min_sms and sms % self.align == 0


# compute capability major -> (minimum SMs, alignment); RULES_SOURCE ("9.0+": 8 and 8: on H100/H200,
# 132 SMs, a partition is a multiple of 8 SMs); SGLang's green-context SM split
# (sgl_kernel.spatial, get_arch_constraints) uses the same table
PARTITION_RULES: dict[int, tuple[int, int]] = {6: (1, 1), 7: (2, 2), 8: (4, 2), 9: (8, 8)}


def partition_rule(major: int, minor: int = 0) -> PartitionRule:
    """The documented guideline for compute capability ``major.minor`` (9.0 and newer: 8/8)."""
    if major < 6:
        raise ValueError(f"compute capability {major}.{minor}: green contexts need 6.0 or newer")
    lo, al = PARTITION_RULES[min(major, 9)]
    return PartitionRule(lo, al)


@dataclass(frozen=True)
class Ladder:
    """The shared stage's co-running SM levels (ascending, ``S_min .. S_cap``), the aggressive
    cap ``s_aggr`` (default: the whole GPU) and the GPU's ``total_sms``. ``levels[i]`` is a
    partition size the driver accepts; :meth:`complement` is the downstream stage's share."""

    total_sms: int
    levels: tuple[int, ...]
    rule: PartitionRule
    s_aggr: int = 0  # 0: the whole GPU

    def __post_init__(self) -> None:
        lv = self.levels
        if not lv:
            raise ValueError("Ladder: at least one level")
        if list(lv) != sorted(set(lv)):
            raise ValueError(f"Ladder: levels must be strictly ascending, got {list(lv)}")
        bad = [s for s in lv if not self.rule.valid(s) or s >= self.total_sms]
        if bad:
            raise ValueError(
                f"Ladder: levels {bad} are not partitions of {self.total_sms} SMs with minimum "
                f"{self.rule.min_sms} and alignment {self.rule.align}"
            )
        if self.s_aggr == 0:
            object.__setattr__(self, "s_aggr", self.total_sms)
        if not lv[-1] < self.s_aggr <= self.total_sms:
            raise ValueError(f"Ladder needs S_cap < S_aggr <= S_tot (Equation 1), got S_cap={lv[-1]}, "
                             f"S_aggr={self.s_aggr}, S_tot={self.total_sms}")

    @property
    def s_min(self) -> int:
        return self.levels[0]

    @property
    def s_cap(self) -> int:
        return self.levels[-1]

    @property
    def s_total(self) -> int:
        return self.total_sms

    def snap(self, x: float) -> int:
        """Index of the level nearest ``x`` (ties to the lower level): Equation 1's ``snap_S``."""
        lv = self.levels
        i = bisect_left(lv, x)
        if i == 0:
            return 0
        if i == len(lv):
            return len(lv) - 1
        return i - 1 if x - lv[i - 1] <= lv[i] - x else i

    def complement(self, level: int) -> int:
        return self.total_sms - self.levels[level]

    def level_for(self, sm_cap: int | None) -> int | None:
        """The ladder index for a policy's cap: the largest level not above it (the smallest
        level if the cap is below all of them); None (no green context, the whole GPU) when
        there is no cap or it reaches the GPU's total."""
        if sm_cap is None or sm_cap >= self.total_sms:
            return None
        best = 0
        for i, s in enumerate(self.levels):
            if s <= sm_cap:
                best = i
        return best

    def to_json(self) -> dict[str, object]:
        return {
            "total_sms": self.total_sms,
            "levels": list(self.levels),
            "s_aggr": self.s_aggr,
            "complement": [self.total_sms - s for s in self.levels],
            "min_sms": self.rule.min_sms,
            "align": self.rule.align,
            "rule_source": self.rule.source,
        }


@dataclass(frozen=True)
class LadderSpec:
    """Which levels to build once the GPU's SM count and rule are known: explicit ``levels``
    (each snapped up to a valid partition); or ``count`` levels evenly spaced in ``[s_min,
    s_max]`` (each rounded to the nearest aligned count); or ``s_min`` to ``s_max`` in ``step``.
    Defaults: the smallest partition, the largest one that leaves the other stage at least one
    minimum partition, the alignment."""

    levels: tuple[int, ...] | None = None
    s_min: int | None = None
    s_max: int | None = None
    step: int | None = None
    count: int | None = None

    def __post_init__(self) -> None:
        for name in ("s_min", "s_max", "step", "count"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"LadderSpec.{name} must be >= 1, got {v}")
        if self.levels is not None and (not self.levels or min(self.levels) < 1):
            raise ValueError(f"LadderSpec.levels must be SM counts >= 1, got {list(self.levels)}")
        if self.step is not None and self.count is not None:
            raise ValueError("LadderSpec: give step or count, not both")
        if self.s_min is not None and self.s_max is not None and self.s_min > self.s_max:
            raise ValueError(f"LadderSpec: s_min {self.s_min} is above s_max {self.s_max}")


def build_ladder(total_sms: int, rule: PartitionRule, spec: LadderSpec | None = None, *,
                 s_aggr: int | None = None) -> Ladder:
    """The ladder ``spec`` asks for on a GPU of ``total_sms`` SMs under ``rule``; every level
    stays below ``s_aggr`` (default: the whole GPU) and leaves the other stage a partition."""
    spec = spec or LadderSpec()
    if total_sms < 2 * rule.min_sms:
        raise ValueError(f"{total_sms} SMs cannot hold two partitions of at least {rule.min_sms}")
    aggr = total_sms if s_aggr is None else s_aggr
    top = min(total_sms - rule.min_sms, aggr - 1)
    top -= top % rule.align
    if top < rule.snap_up(rule.min_sms):
        raise ValueError(f"no SM level below S_aggr {aggr} on {total_sms} SMs under partitions of "
                         f"at least {rule.min_sms}, aligned to {rule.align}")
    if spec.levels is None:
        lo = rule.snap_up(spec.s_min or rule.min_sms)
        hi = min(spec.s_max or top, top)
        hi -= hi % rule.align
        if lo > hi:
            raise ValueError(f"ladder from {lo} to {hi} SMs is empty on {total_sms} SMs")
        if spec.count is not None:
            n = spec.count
            raw = [lo + (hi - lo) * i / (n - 1) for i in range(n)] if n > 1 else [float(hi)]
            levels = [min(hi, max(lo, rule.align * round(x / rule.align))) for x in raw]
        else:
            levels = list(range(lo, hi + 1, spec.step or rule.align))
    else:
        levels = list(spec.levels)
    snapped = sorted({rule.snap_up(s) for s in levels})
    over = [s for s in snapped if s > top]
    if over:
        raise ValueError(
            f"levels {over} leave fewer than {rule.min_sms} of {total_sms} SMs to the other stage"
            + (f" or reach S_aggr {aggr}" if aggr < total_sms else "")
        )
    return Ladder(total_sms, tuple(snapped), rule, aggr)
