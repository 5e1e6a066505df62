"""Workloads: request-type mix, arrival process (generated or trace replay), size overrides, SLOs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from omniplane.spec.base import (
    MAX_RATE,
    Document,
    Fraction,
    Name,
    NotBool,
    PositiveSeconds,
    Rate,
    Seconds,
    Seed,
    SpecModel,
)
from omniplane.spec.component import Modality
from omniplane.spec.errors import SpecFieldError
from omniplane.spec.request import Work
from omniplane.spec.slo import SLOPolicy, SoloMultiplierSLO

CV = Annotated[float, NotBool, Field(gt=0, le=100)]  # assumption: ServeGen fits CVs below 10
WEIBULL_CV = (0.003, 100.0)  # CVs whose Weibull shape omniplane.workload.arrivals can solve for
WeibullCV = Annotated[float, NotBool, Field(ge=WEIBULL_CV[0], le=WEIBULL_CV[1])]
Scale = Annotated[float, NotBool, Field(gt=0, le=1e6)]
Client = Annotated[int, NotBool, Field(ge=0, le=1_000_000)]
_SUM_TOL = 1e-6


def check_fractions(fractions: dict[str, float], what: str) -> None:
    total = sum(fractions.values())
    if abs(total - 1.0) > _SUM_TOL:
        raise ValueError(f"{what} must sum to 1, but sum to {total:.12g} (tolerance {_SUM_TOL:g})")


class Poisson(SpecModel):
    process: Literal["poisson"]
    rate: Rate  # requests per second


class GammaArrivals(SpecModel):
    """Gamma-distributed inter-arrival times with mean 1/rate and coefficient of variation cv."""

    process: Literal["gamma"]
    rate: Rate
    cv: CV


class WeibullArrivals(SpecModel):
    """Weibull inter-arrival times with mean 1/rate and coefficient of variation cv."""

    process: Literal["weibull"]
    rate: Rate
    cv: WeibullCV


class Window(SpecModel):
    start: Seconds
    rate: Annotated[float, NotBool, Field(ge=0, le=MAX_RATE)]
    cv: CV = 1.0
    pattern: Literal["gamma", "weibull"] = "gamma"

    @model_validator(mode="after")
    def _weibull(self) -> Window:
        if self.pattern == "weibull" and not WEIBULL_CV[0] <= self.cv <= WEIBULL_CV[1]:
            raise ValueError(f"a weibull window needs {WEIBULL_CV[0]} <= cv <= {WEIBULL_CV[1]:g} "
                             f"(got {self.cv})")
        return self


class PiecewiseArrivals(SpecModel):
    """A rate (and CV) per window, as ServeGen publishes them; window i lasts until window i+1."""

    process: Literal["piecewise"]
    windows: Annotated[list[Window], Field(min_length=1)]
    window_s: PositiveSeconds | None = None  # length of the last window (default: as the others)

    @model_validator(mode="after")
    def _increasing(self) -> PiecewiseArrivals:
        if all(w.rate == 0 for w in self.windows):
            raise ValueError("every window has rate 0: the process has no arrivals")
        starts = [w.start for w in self.windows]
        for i in range(1, len(starts)):
            if starts[i] <= starts[i - 1]:
                raise ValueError(
                    f"windows[{i}].start ({starts[i]}) must be greater than "
                    f"windows[{i - 1}].start ({starts[i - 1]})"
                )
        return self


TraceFormat = Literal["azure", "mooncake", "servegen", "csv", "jsonl"]


class TraceMapping(SpecModel):
    """How trace rows become requests of the model's types.

    A row's type is, in order: its own ``type_column`` value; otherwise its input modalities
    (text, plus each modality whose count field in the trace is positive, plus each modality
    of ``extra_inputs`` added with its probability) and an output modality drawn from
    ``output_fractions``. ``sizes`` maps ``component.quantity`` to a trace field that
    overrides that work quantity (e.g. ``thinker.prompt_tokens: prompt_tokens``).
    """

    type_column: str | None = None
    output_fractions: dict[Modality, Fraction] | None = None
    extra_inputs: dict[Modality, Fraction] = Field(default_factory=dict)
    sizes: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _fractions(self) -> TraceMapping:
        if self.output_fractions is not None:
            check_fractions({k.value: v for k, v in self.output_fractions.items()},
                            "output_fractions")
        for key in self.sizes:
            if key.count(".") != 1:
                raise ValueError(f"sizes key {key!r} must look like 'component.quantity'")
        return self


class TraceArrivals(SpecModel):
    """Replay a trace file (path relative to the workload file, or a shipped trace name:
    ``azure-conv``, ``azure-code``, ``mooncake-conversation``, ``servegen-mm-image``).

    The run starts at trace time ``start_s``; trace time is stretched by ``time_scale`` (>1 means
    a lower rate), or, when ``rate`` is given, scaled so the mean rate is ``rate`` requests per
    second (request-level traces compress time; ServeGen scales its window rates instead).
    ``clients`` picks ServeGen clients by chunk number (default: all 35).
    """

    process: Literal["trace"]
    trace: str
    format: TraceFormat
    time_scale: Scale = 1.0  # >1 stretches time (lower rate)
    rate: Rate | None = None  # replay at this mean rate instead (req/s)
    start_s: Seconds = 0.0
    clients: Annotated[list[Client], Field(min_length=1)] | None = None
    mapping: TraceMapping | None = None

    def option_issues(self) -> list[tuple[tuple[str, ...], str]]:
        """Conflicting options, located under ``arrival`` (checked by :class:`WorkloadSpec`)."""
        issues: list[tuple[tuple[str, ...], str]] = []
        if self.rate is not None and self.time_scale != 1.0:
            issues.append((("arrival", "time_scale"), "give either rate or time_scale, not both"))
        if self.clients is not None and self.format != "servegen":
            issues.append((("arrival", "clients"),
                           f"clients selects ServeGen clients; format is {self.format!r}"))
        return issues


Arrival = Annotated[
    Poisson | GammaArrivals | WeibullArrivals | PiecewiseArrivals | TraceArrivals,
    Field(discriminator="process"),
]


class WorkloadSpec(Document):
    """``kind: workload``. ``model`` is a catalog name or a model file relative to this file."""

    kind: Literal["workload"] = "workload"
    name: Name
    description: str = ""
    model: str
    mix: dict[Name, Fraction] | None = None
    arrival: Arrival
    sizes: dict[Name, Work] = Field(default_factory=dict)  # type -> component -> quantity -> dist
    slo: SLOPolicy = Field(default_factory=SoloMultiplierSLO)
    duration_s: PositiveSeconds | None = None
    seed: Seed = 0

    @model_validator(mode="after")
    def _mix(self) -> WorkloadSpec:
        if isinstance(self.arrival, TraceArrivals) and self.arrival.option_issues():
            raise SpecFieldError(self.arrival.option_issues())
        if self.mix is not None:
            total = sum(self.mix.values())
            if abs(total - 1.0) > _SUM_TOL:
                raise SpecFieldError([(("mix",), f"mix fractions must sum to 1, but sum to {total:.12g}")])
        elif not (
            isinstance(self.arrival, TraceArrivals)
            and self.arrival.mapping is not None
            and (self.arrival.mapping.type_column or self.arrival.mapping.output_fractions)
        ):
            raise SpecFieldError([(("mix",),
                "mix is required unless the arrival trace's mapping assigns types "
                "(type_column or output_fractions)")])
        return self
