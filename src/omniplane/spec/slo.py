"""SLO policies: explicit per-type targets, or derived from solo / isolated latency percentiles."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from omniplane.spec.base import Name, PositiveFloat, SpecModel

Percentile = Annotated[float, Field(gt=0, lt=100)]

# HorizonServe section 6.1: "We set each class SLO target to 5x its isolated p95 first-response
# latency"; Cornfigurator section 6.1: "take its p25 latency as the target"
HORIZON_MULTIPLIER = 5.0
HORIZON_PERCENTILE = 95.0
CORNFIGURATOR_PERCENTILE = 25.0


class ExplicitSLO(SpecModel):
    """Fixed targets in milliseconds, per request type."""

    policy: Literal["explicit"] = "explicit"
    targets_ms: Annotated[dict[Name, PositiveFloat], Field(min_length=1)]


class SoloMultiplierSLO(SpecModel):
    """``multiplier`` x the solo ``percentile`` first-response latency of each type run alone
    (HorizonServe section 6.1: 5 x solo p95)."""

    policy: Literal["solo_multiplier"] = "solo_multiplier"
    multiplier: PositiveFloat = HORIZON_MULTIPLIER
    percentile: Percentile = HORIZON_PERCENTILE


class IsolatedPercentileSLO(SpecModel):
    """The ``percentile`` latency of the highest-throughput configuration serving the type in
    isolation, times ``multiplier`` (Cornfigurator section 6.1: p25, multiplier 1)."""

    policy: Literal["isolated_percentile"] = "isolated_percentile"
    percentile: Percentile = CORNFIGURATOR_PERCENTILE
    multiplier: PositiveFloat = 1.0


SLOPolicy = Annotated[
    ExplicitSLO | SoloMultiplierSLO | IsolatedPercentileSLO, Field(discriminator="policy")
]
