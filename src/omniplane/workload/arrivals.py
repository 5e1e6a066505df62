"""Arrival processes: Poisson, Gamma and Weibull renewal processes with a given mean rate and
coefficient of variation (CV) of inter-arrival times, and piecewise-rate processes (a rate,
CV and pattern per window, as ServeGen publishes them).

Parameterisation (inter-arrival time X with mean 1/rate):

- Gamma: shape k = 1 / cv^2, scale = 1 / (rate k)  (CV of a Gamma is 1/sqrt(k)).
- Weibull: shape k solves cv^2 = G(1 + 2/k) / G(1 + 1/k)^2 - 1 (G = the gamma function; the
  right side falls monotonically in k), scale = 1 / (rate G(1 + 1/k)).
- Poisson: exponential gaps (Gamma with cv = 1).

Every process is stationary from its start: the first arrival comes after an equilibrium
residual gap (U x a length-biased gap), not a fresh one, so the expected count in any
interval is exactly rate x length, whatever the CV. A piecewise process restarts, stationary,
at each window start with that window's rate/CV (windows of rate 0 are silent) and, when
more time or requests are asked for than its windows cover, repeats its windows with
period ``last start + last window length``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln

from omniplane.errors import InputError
from omniplane.spec.workload import GammaArrivals, PiecewiseArrivals, Poisson, WeibullArrivals

GeneratedArrival = Poisson | GammaArrivals | WeibullArrivals | PiecewiseArrivals
GENERATED = ("poisson", "gamma", "weibull", "piecewise")
_K_LO, _K_HI = 0.05, 500.0  # Weibull shapes searched: CV from ~1.9e5 down to ~0.0026


def gamma_shape(cv: float) -> float:
    if not cv > 0:
        raise InputError(f"cv must be > 0 (got {cv})")
    return 1.0 / cv**2


def weibull_cv(k: float) -> float:
    """CV of a Weibull with shape ``k``."""
    return math.sqrt(math.expm1(gammaln(1 + 2 / k) - 2 * gammaln(1 + 1 / k)))


def weibull_shape(cv: float) -> float:
    """The Weibull shape whose CV is ``cv`` (cv = 1 gives k = 1, the exponential)."""
    if not weibull_cv(_K_HI) <= cv <= weibull_cv(_K_LO):
        raise InputError(f"Weibull cv {cv} is outside the supported range "
                         f"[{weibull_cv(_K_HI):.3g}, {weibull_cv(_K_LO):.3g}]")
    root = brentq(lambda lk: math.log(weibull_cv(math.exp(lk))) - math.log(cv),
                  math.log(_K_LO), math.log(_K_HI), xtol=1e-12)
    return math.exp(float(root))


@dataclass(frozen=True)
class Renewal:
    """Inter-arrival gaps of one stationary renewal process (mean 1/rate, CV cv)."""

    rate: float
    cv: float = 1.0
    pattern: str = "gamma"  # gamma | weibull (exponential when cv == 1)
    shape: float = field(init=False)

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise InputError(f"rate must be a positive number (got {self.rate})")
        if self.pattern not in ("gamma", "weibull"):
            raise InputError(f"pattern must be gamma or weibull (got {self.pattern!r})")
        k = weibull_shape(self.cv) if self.pattern == "weibull" else gamma_shape(self.cv)
        object.__setattr__(self, "shape", k)

    @property
    def _scale(self) -> float:
        if self.pattern == "weibull":
            return 1.0 / (self.rate * math.exp(gammaln(1 + 1 / self.shape)))
        return 1.0 / (self.rate * self.shape)

    def gaps(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.pattern == "weibull":
            return rng.weibull(self.shape, n) * self._scale
        return rng.gamma(self.shape, self._scale, n)

    def residual(self, rng: np.random.Generator) -> float:
        """Time to the first arrival of the stationary process: U x (length-biased gap).
        Length-biased Gamma(k, s) is Gamma(k + 1, s); length-biased Weibull(k, s) is
        s * Y^(1/k) with Y ~ Gamma(1 + 1/k, 1)."""
        if self.pattern == "weibull":
            biased = self._scale * rng.gamma(1 + 1 / self.shape) ** (1 / self.shape)
        else:
            biased = rng.gamma(self.shape + 1, self._scale)
        return float(rng.random() * biased)

    def first_n(self, rng: np.random.Generator, t0: float, n: int) -> np.ndarray:
        """The first ``n`` arrivals after ``t0``."""
        if n <= 0:
            return np.empty(0)
        start = t0 + self.residual(rng)
        return start + np.concatenate(([0.0], np.cumsum(self.gaps(rng, n - 1))))

    def times(self, rng: np.random.Generator, t0: float, t1: float) -> np.ndarray:
        """Arrivals in ``[t0, t1)``; expected count rate x (t1 - t0)."""
        expect = self.rate * (t1 - t0)
        chunk = int(expect + 6 * math.sqrt(expect) * max(self.cv, 1.0) + 16)
        parts = [np.array([t0 + self.residual(rng)])]
        while parts[-1][-1] < t1:
            parts.append(parts[-1][-1] + np.cumsum(self.gaps(rng, chunk)))
        out = np.concatenate(parts)
        return out[: int(np.searchsorted(out, t1, side="left"))]


def renewal_of(spec: Poisson | GammaArrivals | WeibullArrivals, scale: float) -> Renewal:
    if isinstance(spec, Poisson):
        return Renewal(spec.rate * scale)
    pattern = "weibull" if isinstance(spec, WeibullArrivals) else "gamma"
    return Renewal(spec.rate * scale, spec.cv, pattern)


def mean_rate(spec: GeneratedArrival) -> float:
    """Long-run mean rate (a piecewise process: time-weighted over one period from time 0)."""
    if not isinstance(spec, PiecewiseArrivals):
        return spec.rate
    starts, ends = window_bounds(spec)
    if not math.isfinite(ends[-1]):
        return spec.windows[-1].rate
    busy = sum(w.rate * (e - s) for w, s, e in zip(spec.windows, starts, ends, strict=True))
    return float(busy / ends[-1])


def window_bounds(spec: PiecewiseArrivals) -> tuple[list[float], list[float]]:
    """Start and end of each window (the last is infinite when it has no length)."""
    starts = [w.start for w in spec.windows]
    ends = starts[1:]
    if spec.window_s is not None:
        ends.append(starts[-1] + spec.window_s)
    elif len(starts) > 1:
        ends.append(starts[-1] + (starts[-1] - starts[-2]))
    else:
        ends.append(math.inf)
    return starts, ends


def arrival_times(
    arrival_spec: GeneratedArrival,
    rng: np.random.Generator,
    *,
    duration_s: float | None = None,
    n: int | None = None,
    rate_scale: float = 1.0,
    rate: float | None = None,
) -> np.ndarray:
    """Sorted arrival times in seconds: those in ``[0, duration_s)``, the first ``n``, or the
    first ``n`` within ``duration_s`` when both are given.

    ``rate`` replaces the process's mean rate (keeping its CV and, for piecewise processes,
    the shape of its rate over time); ``rate_scale`` multiplies the rate on top.
    Deterministic for a given ``rng`` state.
    """
    if duration_s is None and n is None:
        raise InputError("give duration_s or n")
    if duration_s is not None and not duration_s > 0:
        raise InputError(f"duration_s must be > 0 (got {duration_s})")
    if n is not None and n < 0:
        raise InputError(f"n must be >= 0 (got {n})")
    if not rate_scale > 0:
        raise InputError(f"rate_scale must be > 0 (got {rate_scale})")
    if not isinstance(arrival_spec, GeneratedArrival):
        raise TypeError(f"arrival_times generates {', '.join(GENERATED)} processes; replay a trace "
                        "with omniplane.workload.generate or load_trace")
    base = mean_rate(arrival_spec)
    if base <= 0:
        raise InputError("every window of the piecewise process has rate 0: no arrivals")
    scale = rate_scale * (rate / base if rate is not None else 1.0)
    if isinstance(arrival_spec, PiecewiseArrivals):
        return _piecewise(arrival_spec, rng, duration_s, n, scale)
    process = renewal_of(arrival_spec, scale)
    if n is None:
        assert duration_s is not None
        return process.times(rng, 0.0, duration_s)
    t = process.first_n(rng, 0.0, n)
    return t if duration_s is None else t[: int(np.searchsorted(t, duration_s, side="left"))]


def _piecewise(
    spec: PiecewiseArrivals,
    rng: np.random.Generator,
    duration_s: float | None,
    n: int | None,
    scale: float,
) -> np.ndarray:
    starts, ends = window_bounds(spec)
    if mean_rate(spec) <= 0:
        raise InputError("every window of the piecewise process has rate 0: no arrivals")
    horizon = duration_s if duration_s is not None else math.inf
    parts: list[np.ndarray] = []
    count = 0
    offset = 0.0
    while offset < horizon and (n is None or count < n):
        for w, s, e in zip(spec.windows, starts, ends, strict=True):
            t0, t1 = offset + s, min(offset + e, horizon)
            if t0 >= horizon or (n is not None and count >= n):
                break
            if w.rate <= 0:
                continue
            process = Renewal(w.rate * scale, w.cv, w.pattern)
            if math.isinf(t1):  # an unbounded last window: draw what is still needed
                assert n is not None
                times = process.first_n(rng, t0, n - count)
            else:
                times = process.times(rng, t0, t1)
            parts.append(times)
            count += len(times)
        offset += ends[-1]
    if n is not None and duration_s is None and count < n:
        raise InputError(f"the piecewise process ends in a silent window; only {count} of {n} arrivals "
                         "(give a duration instead)")
    out = np.concatenate(parts) if parts else np.empty(0)
    return out if n is None else out[:n]
