"""SM ladders: the SM counts a stage may be capped to, valid for a GPU architecture.

A green-context partition has a minimum size and an alignment that depend on the compute
architecture. The driver reports both at run time (``minSmPartitionSize`` and
``smCoscheduledAlignment`` of the device's SM resource, CUDA 13); :data:`PARTITION_RULES` is the
guideline the CUDA driver API documentation gives when those fields are not available.

The shared stage's ladder runs from ``S_min`` to ``S_cap`` (HorizonServe section 4.4) plus the
aggressive cap ``S_aggr`` used while no downstream stage is active; the downstream stage holds
the complementary ladder ``total - s`` for every level ``s``, so the two always sum to the GPU's
SM count. Pure arithmetic: no GPU needed.
"""

from __future__ import annotations

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

    def valid(self, sms: int) -> bool:
        return sms >= self.min_sms and sms % self.align == 0


# compute capability major -> (minimum SMs, alignment); RULES_SOURCE
PARTITION_RULES: dict[int, tuple[int, int]] = {6: (1, 1), 7: (2, 2), 8: (4, 2), 9: (8, 8)}


def partition_rule(major: int, minor: int = 0) -> PartitionRule:
    """The documented guideline for compute capability ``major.minor`` (9.0 and newer: 8/8)."""
    if major < 6:
        raise ValueError(f"compute capability {major}.{minor}: green contexts need 6.0 or newer")
    lo, al = PARTITION_RULES[min(major, 9)]
    return PartitionRule(lo, al)


@dataclass(frozen=True)
class Ladder:
    """The shared stage's SM levels, ascending, and the GPU's total. ``levels[i]`` is a
    partition size the driver accepts; :meth:`complement` is the downstream stage's share."""

    total_sms: int
    levels: tuple[int, ...]
    rule: PartitionRule

    def __post_init__(self) -> None:
        if not self.levels:
            raise ValueError("Ladder: at least one level")
        if list(self.levels) != sorted(set(self.levels)):
            raise ValueError(f"Ladder: levels must be strictly ascending, got {list(self.levels)}")
        bad = [s for s in self.levels if not self.rule.valid(s) or s >= self.total_sms]
        if bad:
            raise ValueError(
                f"Ladder: levels {bad} are not partitions of {self.total_sms} SMs with minimum "
                f"{self.rule.min_sms} and alignment {self.rule.align}"
            )

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
            "complement": [self.total_sms - s for s in self.levels],
            "min_sms": self.rule.min_sms,
            "align": self.rule.align,
            "rule_source": self.rule.source,
        }


@dataclass(frozen=True)
class LadderSpec:
    """How to build a ladder once the GPU's SM count and rule are known: explicit ``levels``
    (each snapped up to a valid partition), or ``s_min`` to ``s_max`` in ``step``. Defaults:
    the smallest partition, the largest one that leaves the other stage at least one minimum
    partition, the alignment."""

    levels: tuple[int, ...] | None = None
    s_min: int | None = None
    s_max: int | None = None
    step: int | None = None

    def __post_init__(self) -> None:
        for name in ("s_min", "s_max", "step"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"LadderSpec.{name} must be >= 1, got {v}")
        if self.levels is not None and (not self.levels or min(self.levels) < 1):
            raise ValueError(f"LadderSpec.levels must be SM counts >= 1, got {list(self.levels)}")


def build_ladder(total_sms: int, rule: PartitionRule, spec: LadderSpec | None = None) -> Ladder:
    """The ladder ``spec`` asks for on a GPU of ``total_sms`` SMs under ``rule``."""
    spec = spec or LadderSpec()
    if total_sms < 2 * rule.min_sms:
        raise ValueError(f"{total_sms} SMs cannot hold two partitions of at least {rule.min_sms}")
    top = total_sms - rule.min_sms
    top -= top % rule.align
    if spec.levels is None:
        lo = rule.snap_up(spec.s_min or rule.min_sms)
        hi = min(spec.s_max or top, top)
        levels = list(range(lo, hi + 1, spec.step or rule.align))
        if not levels:
            raise ValueError(f"ladder from {lo} to {hi} SMs is empty on {total_sms} SMs")
    else:
        levels = list(spec.levels)
    snapped = sorted({rule.snap_up(s) for s in levels})
    over = [s for s in snapped if s > top]
    if over:
        raise ValueError(
            f"levels {over} leave fewer than {rule.min_sms} of {total_sms} SMs to the other stage"
        )
    return Ladder(total_sms, tuple(snapped), rule)
