"""SLO policies: explicit per-type targets, or derived from solo / isolated latency percentiles."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from omniplane.spec.base import Name, PositiveFloat, SpecModel

Percentile = Annotated[float, Field(gt=0, lt=100)]


class ExplicitSLO(SpecModel):
    """Fixed targets in milliseconds, per request type."""

    policy: Literal["explicit"] = "explicit"
    targets_ms: Annotated[dict[Name, PositiveFloat], Field(min_length=1)]


class SoloMultiplierSLO(SpecModel):
    """``multiplier`` x the solo ``percentile`` first-response latency of each type run alone
    (HorizonServe section 6.1: 5 x solo p95)."""

    policy: Literal["solo_multiplier"] = "solo_multiplier"
    multiplier: PositiveFloat = 5.0
    percentile: Percentile = 95.0


class IsolatedPercentileSLO(SpecModel):
    """The ``percentile`` latency of the highest-throughput configuration serving the type in
    isolation, times ``multiplier`` (Cornfigurator section 6.1: p25, multiplier 1)."""

    policy: Literal["isolated_percentile"] = "isolated_percentile"
    percentile: Percentile = 25.0
    multiplier: PositiveFloat = 1.0


SLOPolicy = Annotated[
    ExplicitSLO | SoloMultiplierSLO | IsolatedPercentileSLO, Field(discriminator="policy")
]
