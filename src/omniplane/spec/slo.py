"""SLOs: the policies a workload states (explicit per-type targets, or derived from solo /
isolated latency percentiles), the targets a plan file stores (:class:`LatencyTargets`), and the
one ``--slo`` syntax every command parses (:func:`parse_slo`). Resolving a policy into targets is
``omniplane.slo.resolve.resolve_targets``, the one resolver."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from omniplane.spec.base import Name, NotBool, SpecModel

Percentile = Annotated[float, NotBool, Field(gt=0, lt=100)]
MAX_TARGET_MS = 1e9  # assumption: 11.6 days, far beyond any first-response target
Milliseconds = Annotated[float, NotBool, Field(gt=0, le=MAX_TARGET_MS)]
Multiplier = Annotated[float, NotBool, Field(gt=0, le=1000)]  # assumption: 1,000 x solo at most

# HorizonServe section 6.1: "We set each class SLO target to 5x its isolated p95 first-response
# latency"; Cornfigurator section 6.1: "take its p25 latency as the target"
HORIZON_MULTIPLIER = 5.0
HORIZON_PERCENTILE = 95.0
CORNFIGURATOR_PERCENTILE = 25.0


class ExplicitSLO(SpecModel):
    """Fixed targets in milliseconds, per request type."""

    policy: Literal["explicit"] = "explicit"
    targets_ms: Annotated[dict[Name, Milliseconds], Field(min_length=1)]


class SoloMultiplierSLO(SpecModel):
    """``multiplier`` x the solo ``percentile`` first-response latency of each type run alone
    (HorizonServe section 6.1: 5 x solo p95)."""

    policy: Literal["solo_multiplier"] = "solo_multiplier"
    multiplier: Multiplier = HORIZON_MULTIPLIER
    percentile: Percentile = HORIZON_PERCENTILE


class IsolatedPercentileSLO(SpecModel):
    """The ``percentile`` latency of the highest-throughput configuration serving the type in
    isolation, times ``multiplier`` (Cornfigurator section 6.1: p25, multiplier 1)."""

    policy: Literal["isolated_percentile"] = "isolated_percentile"
    percentile: Percentile = CORNFIGURATOR_PERCENTILE
    multiplier: Multiplier = 1.0


SLOPolicy = Annotated[
    ExplicitSLO | SoloMultiplierSLO | IsolatedPercentileSLO, Field(discriminator="policy")
]


def describe(policy: SLOPolicy) -> str:
    """A policy in the ``--slo`` syntax: ``isolated p25``, ``5x solo p95``, ``explicit``."""
    if isinstance(policy, ExplicitSLO):
        return "explicit"
    kind = "isolated" if isinstance(policy, IsolatedPercentileSLO) else "solo"
    times = "" if policy.multiplier == 1 and kind == "isolated" else f"{policy.multiplier:g}x "
    return f"{times}{kind} p{policy.percentile:g}"


class LatencyTargets(SpecModel):
    """Per-type first-response latency targets (the ``slo`` field of a plan file): what the plan
    was made for, and what ``sim run``, ``rehearse``, ``loadgen`` and ``deploy`` judge it by.

    ``derived_from`` is the policy that produced the targets not given explicitly; ``how`` says,
    per type, how its target was obtained (the deployment the isolated percentile was taken
    on, ``explicit``, or ``--slo`` for a user's value)."""

    targets_ms: Annotated[dict[Name, Milliseconds], Field(min_length=1)]
    derived_from: SLOPolicy | None = None
    how: dict[Name, str] = Field(default_factory=dict)

    @property
    def seconds(self) -> dict[str, float]:
        return {t: ms / 1e3 for t, ms in self.targets_ms.items()}

    def describe(self) -> str:
        base = describe(self.derived_from) if self.derived_from is not None else "explicit"
        user = sorted(t for t, h in self.how.items() if h == USER_TABLE)
        return base + (f", {USER_TABLE} for {', '.join(user)}" if user else "")


USER_TABLE = "--slo"  # the ``how`` of a target the user gave (``--slo TYPE=DURATION``)
SLOBase = Literal["plan", "workload"]


@dataclass(frozen=True)
class SLOChoice:
    """What one ``--slo`` value asks for: a base (a policy to resolve, the plan file's targets,
    the workload's policy, or None: the command's default) and a user's table of targets (ms)
    on top."""

    base: SLOPolicy | SLOBase | None = None
    targets_ms: Mapping[str, float] = field(default_factory=dict)


_POLICY_RE = re.compile(
    r"^(?:(?P<m>\d+(?:\.\d*)?|\.\d+)\s*x[\s_:-]*)?(?P<kind>isolated|solo)(?:[\s_:-]*p(?P<q>\d+(?:\.\d*)?))?$")
_DURATION_RE = re.compile(r"^(?P<v>\d+(?:\.\d*)?(?:e[+-]?\d+)?|\.\d+)\s*(?P<unit>ms|s)?$")
SLO_SYNTAX = ("TYPE=DURATION items (ti2t=800ms, ti2a=3s), at most one policy (isolated p25, "
              "5x solo p95) or 'plan' / 'workload', separated by commas")


def parse_duration_ms(text: str, where: str) -> float:
    """``800ms`` / ``3s`` / ``1.5s`` -> milliseconds; a bare number is refused (it was ms for
    some commands and seconds for others)."""
    m = _DURATION_RE.match(text.strip().lower())
    if m is None:
        raise ValueError(f"{where}: expected a duration such as 800ms or 3s, got {text.strip()!r}")
    if m["unit"] is None:
        raise ValueError(f"{where}: {text.strip()!r} needs a unit: {text.strip()}ms or {text.strip()}s")
    value = float(m["v"]) * (1.0 if m["unit"] == "ms" else 1e3)
    if not value > 0:
        raise ValueError(f"{where}: the target must be positive, got {text.strip()!r}")
    if not value <= MAX_TARGET_MS:
        raise ValueError(f"{where}: the target must be at most {MAX_TARGET_MS:g} ms, got {text.strip()!r}")
    return value


def parse_slo(text: str | Sequence[str], types: Sequence[str] | None = None, *,
              option: str = "--slo") -> SLOChoice:
    """The one ``--slo`` syntax (every command): :data:`SLO_SYNTAX`. Examples: ``isolated p25``,
    ``5x solo p95``, ``solo`` (5x p95), ``ti2t=800ms,ti2a=3s``, ``plan, ti2t=800ms``. A
    sequence (a repeated option) reads as its items joined by commas. ``types``: the model's
    request types, which the table's names must be. Errors name the option, the item and what
    was expected."""
    joined = text if isinstance(text, str) else ",".join(text)
    base: SLOPolicy | SLOBase | None = None
    targets: dict[str, float] = {}
    for raw in joined.split(","):
        item = raw.strip()
        if not item:
            continue
        where = f"{option} {item!r}"
        name, sep, value = item.partition("=")
        if sep:
            name = name.strip()
            if types is not None and name not in types:
                raise ValueError(f"{where}: unknown request type {name!r} "
                                 f"(expected one of: {', '.join(types)})")
            if name in targets:
                raise ValueError(f"{where}: {name} is given twice")
            targets[name] = parse_duration_ms(value, where)
            continue
        parsed = _parse_base(item.lower(), where)
        if base is not None:
            raise ValueError(f"{where}: a second policy after {_name(base)!r}; give only one")
        base = parsed
    return SLOChoice(base=base, targets_ms=targets)


def _name(base: SLOPolicy | str) -> str:
    return base if isinstance(base, str) else describe(base)


def _parse_base(item: str, where: str) -> SLOPolicy | SLOBase:
    if item in ("plan", "workload"):
        return "plan" if item == "plan" else "workload"
    m = _POLICY_RE.match(item)
    if m is None:
        raise ValueError(f"{where}: expected {SLO_SYNTAX}")
    cls: type[IsolatedPercentileSLO] | type[SoloMultiplierSLO] = (
        IsolatedPercentileSLO if m["kind"] == "isolated" else SoloMultiplierSLO)
    fields: dict[str, float] = {}
    if m["m"] is not None:
        fields["multiplier"] = float(m["m"])
    if m["q"] is not None:
        fields["percentile"] = float(m["q"])
    if not fields.get("multiplier", 1.0) > 0:
        raise ValueError(f"{where}: the multiplier must be positive")
    if not 0 < fields.get("percentile", 50.0) < 100:
        raise ValueError(f"{where}: the percentile must be between 0 and 100 (exclusive)")
    return cls(**fields)
