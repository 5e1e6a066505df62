"""``generate``: a workload spec in, the requests of one run out (seeded, deterministic).

Three independent random streams are spawned from the seed (arrivals, types, sizes), so, for
example, changing the mix does not move the arrival times.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from omniplane.errors import InputError
from omniplane.spec.base import MAX_REQUESTS
from omniplane.spec.load import ResolvedWorkload
from omniplane.spec.work import ResolvedWork
from omniplane.spec.workload import TraceArrivals
from omniplane.workload.arrivals import arrival_times, mean_rate
from omniplane.workload.load import load_trace, resolve_trace
from omniplane.workload.mapping import assign_types, draw_types, given_sizes
from omniplane.workload.request import NO_META, Request
from omniplane.workload.servegen import load_servegen
from omniplane.workload.sizes import rows, sample_sizes
from omniplane.workload.trace import Trace

_MIX_TOL = 1e-6


def generate(
    workload: ResolvedWorkload,
    *,
    duration_s: float | None = None,
    n: int | None = None,
    rate: float | None = None,
    rate_scale: float = 1.0,
    seed: int | None = None,
    mix: Mapping[str, float] | None = None,
) -> list[Request]:
    """The requests of a run, in arrival order, ids 0..n-1.

    Length: ``duration_s`` and/or ``n`` (default: the spec's ``duration_s``; a trace without
    either replays to its end). ``rate`` replaces the mean arrival rate, keeping the CV or the
    trace's shape over time; ``rate_scale`` multiplies it. ``mix`` replaces the type fractions
    (for a trace: types are drawn from it, trace sizes still apply). ``seed`` defaults to the
    spec's.
    """
    spec, model = workload.spec, workload.model
    if duration_s is None and n is None:
        duration_s = spec.duration_s
    if mix is not None:
        _check_mix(mix, model.type_names)
    if rate is not None and not (rate > 0 and math.isfinite(rate)):
        raise InputError(f"rate must be a positive number (got {rate})")
    if not rate_scale > 0:
        raise ValueError(f"rate_scale must be > 0 (got {rate_scale})")
    if not isinstance(spec.arrival, TraceArrivals):
        _check_size(spec.name, spec.arrival, duration_s, n, rate, rate_scale)
    streams = np.random.SeedSequence(spec.seed if seed is None else seed).spawn(3)
    rng_arrival, rng_types, rng_sizes = (np.random.default_rng(s) for s in streams)
    given: dict[str, dict[str, np.ndarray]] = {}
    metas: list[dict[str, Any]] | None = None
    if isinstance(spec.arrival, TraceArrivals):
        trace = replay(workload, rng_arrival, duration_s=duration_s, n=n, rate=rate,
                       rate_scale=rate_scale)
        mapping = spec.arrival.mapping
        types = assign_types(trace, model, mapping, rng_types, mix if mix is not None else spec.mix)
        given = given_sizes(trace, mapping)
        times, metas = trace.arrival, trace.rows()
    else:
        if duration_s is None and n is None:
            raise InputError(f"workload {spec.name!r} has no duration_s; give duration_s or n")
        times = arrival_times(spec.arrival, rng_arrival, duration_s=duration_s, n=n,
                              rate_scale=rate_scale, rate=rate)
        use = mix if mix is not None else spec.mix
        assert use is not None  # the spec requires a mix for generated arrivals
        types = draw_types(list(use), list(use.values()), rng_types, len(times))
    works = _works(workload, types, rng_sizes, given)
    arrival = times.tolist()
    names = types.tolist()
    if metas is None:
        return [Request(i, arrival[i], names[i], works[i], NO_META) for i in range(len(arrival))]
    return [Request(i, arrival[i], names[i], works[i], metas[i]) for i in range(len(arrival))]


def _check_size(name: str, arrival: Any, duration_s: float | None, n: int | None, rate: float | None,
                rate_scale: float) -> None:
    """Refuse, before drawing anything, a run of more than MAX_REQUESTS requests."""
    if n is not None and n > MAX_REQUESTS:
        raise InputError(f"{name}: {n:,} requests asked; a run has at most {MAX_REQUESTS:,}")
    if n is None and duration_s is not None:
        expected = (rate if rate is not None else mean_rate(arrival)) * rate_scale * duration_s
        if expected > MAX_REQUESTS:
            raise InputError(f"{name}: {duration_s:g} s at {expected / duration_s:g} req/s is about "
                             f"{expected:,.0f} requests; a run has at most {MAX_REQUESTS:,} (shorten "
                             "the duration or lower the rate)")


def _check_mix(mix: Mapping[str, float], known: list[str]) -> None:
    unknown = [t for t in mix if t not in known]
    if unknown:
        raise InputError(f"mix names unknown request type(s) {unknown} (expected: {', '.join(known)})")
    if any(not (f >= 0) for f in mix.values()) or abs(sum(mix.values()) - 1.0) > _MIX_TOL:
        raise InputError(f"mix fractions must be >= 0 and sum to 1 (got {dict(mix)})")


def _works(workload: ResolvedWorkload, types: np.ndarray, rng: np.random.Generator,
           given: Mapping[str, Mapping[str, np.ndarray]]) -> list[ResolvedWork]:
    """Resolved work per row: each type's rows sampled together (in the model's type order)."""
    out: list[ResolvedWork] = [{}] * len(types)
    for name in workload.model.type_names:
        idx = np.flatnonzero(types == name)
        if len(idx) == 0:
            continue
        sub = {c: {q: v[idx] for q, v in qs.items()} for c, qs in given.items()}
        arrays = sample_sizes(workload.model, name, rng, len(idx), workload.spec.sizes.get(name), sub)
        for i, w in zip(idx.tolist(), rows(arrays, len(idx)), strict=True):
            out[i] = w
    return out


def replay(
    workload: ResolvedWorkload,
    rng: np.random.Generator,
    *,
    duration_s: float | None = None,
    n: int | None = None,
    rate: float | None = None,
    rate_scale: float = 1.0,
) -> Trace:
    """The trace rows of one run, re-timed to run time (see ``TraceArrivals``): from trace time
    ``start_s``, stretched by ``time_scale`` or scaled to ``rate`` (the call's, else the
    spec's), then ``rate_scale``."""
    arr = workload.spec.arrival
    assert isinstance(arr, TraceArrivals)
    path, fmt = resolve_trace(arr.trace, arr.format, workload.base_dir)
    target = rate if rate is not None else arr.rate
    if fmt == "servegen":
        data = load_servegen(path).select(arr.clients)
        stretch = arr.time_scale if rate is None else 1.0
        end = None if duration_s is None else arr.start_s + duration_s / stretch
        mult = rate_scale
        if target is not None:
            mult *= target * stretch / data.mean_rate(arr.start_s, end)
        trace = data.sample(rng, start_s=arr.start_s, end_s=end, n=n, rate_scale=mult)
        return trace.replay(start_s=arr.start_s, time_scale=stretch, duration_s=duration_s, n=n)
    trace = load_trace(path, fmt)
    stretch = arr.time_scale if target is None else trace.mean_rate(arr.start_s) / target
    return trace.replay(start_s=arr.start_s, time_scale=stretch / rate_scale,
                        duration_s=duration_s, n=n)
