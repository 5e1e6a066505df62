"""Size distributions for per-request work (tokens, items, seconds, steps, pixels).

Written in YAML either as a plain positive number (a constant) or as a mapping with a
``dist`` tag. Every distribution is strictly positive: sizes of zero or below are rejected
at load time, and truncation bounds (``min``/``max``) keep samples in range.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from omniplane.spec.base import MAX_MAGNITUDE, NotBool, SpecModel

MAX_WORK = 1e9  # assumption: no request has 10^9 tokens, items, seconds, steps or pixels per side
Size = Annotated[float, NotBool, Field(gt=0, le=MAX_WORK)]
Spread = Annotated[float, NotBool, Field(ge=0, le=MAX_WORK)]
Sigma = Annotated[float, NotBool, Field(ge=0, le=10)]  # of log(x): exp(10) is a 22,000x spread


class _Bounded(SpecModel):
    min: Size | None = None
    max: Size | None = None

    @model_validator(mode="after")
    def _check_bounds(self) -> _Bounded:
        if self.min is not None and self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) must be >= min ({self.min})")
        return self

    def _clip(self, x: np.ndarray) -> np.ndarray:
        lo = self.min if self.min is not None else np.finfo(float).tiny
        hi = self.max if self.max is not None else MAX_WORK
        return np.asarray(np.clip(x, lo, hi), dtype=float)


class Constant(SpecModel):
    dist: Literal["constant"] = "constant"
    value: Size

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.value, dtype=float)

    def mean(self) -> float:
        return self.value


class Uniform(SpecModel):
    dist: Literal["uniform"]
    low: Size
    high: Size

    @model_validator(mode="after")
    def _order(self) -> Uniform:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) must be >= low ({self.low})")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, n)

    def mean(self) -> float:
        return (self.low + self.high) / 2


class Normal(_Bounded):
    """Normal, truncated by clipping to [min, max] (min defaults to the smallest positive float)."""

    dist: Literal["normal"]
    mean_: Size = Field(alias="mean")
    std: Spread

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self._clip(rng.normal(self.mean_, self.std, n))

    def mean(self) -> float:
        return self.mean_


class LogNormal(_Bounded):
    """Log-normal given by its median and the std-dev of log(x) (``sigma``)."""

    dist: Literal["lognormal"]
    median: Size
    sigma: Sigma

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self._clip(rng.lognormal(math.log(self.median), self.sigma, n))

    def mean(self) -> float:
        return self.median * math.exp(self.sigma**2 / 2)


class Exponential(_Bounded):
    dist: Literal["exponential"]
    mean_: Size = Field(alias="mean")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self._clip(rng.exponential(self.mean_, n))

    def mean(self) -> float:
        return self.mean_


class Choice(SpecModel):
    """A discrete distribution: ``values`` with ``weights`` (default: equal)."""

    dist: Literal["choice"]
    values: Annotated[list[Size], Field(min_length=1)]
    weights: list[Annotated[float, NotBool, Field(gt=0, le=MAX_MAGNITUDE)]] | None = None

    @model_validator(mode="after")
    def _weights(self) -> Choice:
        if self.weights is not None and len(self.weights) != len(self.values):
            raise ValueError(
                f"weights has {len(self.weights)} entries but values has {len(self.values)}"
            )
        return self

    def _p(self) -> np.ndarray:
        w = np.ones(len(self.values)) if self.weights is None else np.asarray(self.weights, float)
        return np.asarray(w / w.sum(), dtype=float)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.asarray(rng.choice(np.asarray(self.values, dtype=float), size=n, p=self._p()))

    def mean(self) -> float:
        return float(np.dot(self._p(), np.asarray(self.values, dtype=float)))


Distribution = Annotated[
    Constant | Uniform | Normal | LogNormal | Exponential | Choice, Field(discriminator="dist")
]


def coerce_distribution(value: Any) -> Any:
    """Accept a bare number (or a numeric string, as YAML 1.1 reads ``1e3``) as a constant
    distribution; refuse a boolean as every spec number does."""
    if isinstance(value, bool):
        raise ValueError("expected a number or a distribution, not a boolean")
    if isinstance(value, int | float) or (isinstance(value, str) and _numeric(value)):
        return {"dist": "constant", "value": value}
    return value


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
