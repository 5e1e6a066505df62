"""Base classes shared by every spec: frozen, strict about unknown fields, provenance for numbers."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

Name = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+\-]*$", min_length=1, max_length=80),
]
"""Identifiers: components, request types, GPUs, executor types, plan nodes."""

# Numbers. Every number in a spec is a real number, never a boolean (``NotBool``; a numeric
# string, which PyYAML's YAML 1.1 makes of 1.0e9, is read as the number it says), finite
# (``allow_inf_nan=False`` on :class:`SpecModel`) and at most MAX_MAGNITUDE in size, so
# sums and products of spec numbers stay finite; quantities with a physical scale have tighter
# ranges below. Each range is an assumption far outside anything real, stated in the error.
MAX_MAGNITUDE = 1e15


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    return value


NotBool = BeforeValidator(_not_bool)
Number = Annotated[float, NotBool, Field(ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE)]
PositiveFloat = Annotated[float, NotBool, Field(gt=0, le=MAX_MAGNITUDE)]
NonNegativeFloat = Annotated[float, NotBool, Field(ge=0, le=MAX_MAGNITUDE)]
PositiveInt = Annotated[int, NotBool, Field(gt=0, le=MAX_MAGNITUDE)]
NonNegativeInt = Annotated[int, NotBool, Field(ge=0, le=MAX_MAGNITUDE)]
Fraction = Annotated[float, NotBool, Field(ge=0, le=1)]
Seed = Annotated[int, NotBool, Field(ge=0, le=2**63 - 1)]  # numpy's SeedSequence takes >= 0
Priority = Annotated[int, NotBool, Field(ge=-(2**31), le=2**31 - 1)]  # vLLM's int priority
MAX_REQUESTS = 1_000_000  # per run: assumption (10^6 requests simulate in minutes, 10^7 in an hour)
MAX_RATE = 1e6  # requests per second: assumption, far above any one deployment
MAX_SECONDS = 1e8  # about three years: durations, trace offsets, window starts
Rate = Annotated[float, NotBool, Field(gt=0, le=MAX_RATE)]
Seconds = Annotated[float, NotBool, Field(ge=0, le=MAX_SECONDS)]
PositiveSeconds = Annotated[float, NotBool, Field(gt=0, le=MAX_SECONDS)]

_SOURCE_RE = re.compile(r"^(https?://\S+|arXiv:\S+|doi:\S+|[A-Za-z0-9_./\-]+\.(md|csv|json|jsonl|txt)(#.*)?|measured:.+|derived:.+|assumption:.+)")


def check_source(text: str) -> str:
    """A source is a URL, an arXiv/doi id, a shipped data file, or an explicit
    ``measured:``, ``derived:`` or ``assumption:`` note saying how the number was obtained."""
    text = text.strip()
    if not _SOURCE_RE.match(text):
        raise ValueError(
            "a source must be a URL, 'arXiv:ID', 'doi:ID', a shipped data file, or start with "
            f"'measured:', 'derived:' or 'assumption:' (got {text!r})"
        )
    return text


Source = Annotated[str, AfterValidator(check_source)]


class SpecModel(BaseModel):
    """Frozen, validated at construction, unknown fields rejected. Never does I/O."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)


class Sourced(SpecModel):
    """Numbers with provenance: ``source`` covers every number of the record, ``sources``
    overrides it per field. Every numeric field that is set must end up with a source."""

    source: Source
    sources: dict[str, Source] = Field(default_factory=dict)

    _unsourced: ClassVar[frozenset[str]] = frozenset()
    _sourced_text: ClassVar[frozenset[str]] = frozenset()  # non-numeric facts ``sources`` may name

    @model_validator(mode="after")
    def _check_sources(self) -> Sourced:
        numeric = self.numeric_fields()
        unknown = sorted(set(self.sources) - set(numeric) - self._sourced_text)
        if unknown:
            raise ValueError(
                f"sources names unknown field(s) {unknown}; numeric fields are {sorted(numeric)}"
            )
        return self

    def numeric_fields(self) -> dict[str, float]:
        """Numeric fields that are set (None means 'not stated')."""
        out: dict[str, float] = {}
        for name in type(self).model_fields:
            if name in ("source", "sources") or name in self._unsourced:
                continue
            value = getattr(self, name)
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, int | float):
                out[name] = float(value)
        return out

    def source_of(self, field: str) -> str:
        if field not in type(self).model_fields:
            raise KeyError(field)
        return self.sources.get(field, self.source)

    def provenance(self) -> dict[str, dict[str, Any]]:
        """``{field: {"value": v, "source": s}}`` for every number that is set."""
        return {
            name: {"value": value, "source": self.source_of(name)}
            for name, value in self.numeric_fields().items()
        }


class Document(SpecModel):
    """A top-level spec file. Top-level keys starting with ``x-`` are extension fields (for YAML
    anchors shared by several entries) and are dropped before validation."""

    @model_validator(mode="before")
    @classmethod
    def _drop_extensions(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("x-"))}
        return data
