"""What the planner is asked: a model, a GPU kind and budget, a workload's type mix and a
sample of its requests (Cornfigurator section 3.1).

The per-type request sample is the planner's stand-in for the profiler's per-request
measurements (section 4.4): changing the mix re-weights the same samples, so re-planning for a
new mix or GPU budget reuses every cost computed from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from omniplane.spec import GPUKind, ModelSpec, ResolvedWorkload
from omniplane.spec.work import ResolvedWork
from omniplane.workload import generate

MIX_SAMPLE = 4000  # requests drawn to estimate a trace workload's type mix (assumption)


@dataclass(frozen=True)
class Problem:
    """A planning instance. ``mix`` sums to 1 over the model's types (zero allowed);
    ``samples[t]`` holds sampled requests' resolved work of type ``t``."""

    model: ModelSpec
    gpu: GPUKind
    gpus: int
    mix: Mapping[str, float]
    samples: Mapping[str, tuple[ResolvedWork, ...]]
    workload: ResolvedWorkload

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"the GPU budget must be >= 1, got {self.gpus}")
        unknown = sorted(set(self.mix) - set(self.model.type_names))
        if unknown:
            raise ValueError(f"mix names unknown request types {unknown} of {self.model.name!r}")
        total = sum(self.mix.values())
        if abs(total - 1.0) > 1e-6 or any(v < 0 for v in self.mix.values()):
            raise ValueError(f"mix fractions must be >= 0 and sum to 1 (got {dict(self.mix)})")
        for t in self.model.type_names:
            if not self.samples.get(t):
                raise ValueError(f"no sampled requests of type {t!r}")

    @property
    def types(self) -> list[str]:
        return self.model.type_names

    @property
    def active(self) -> list[str]:
        """Types with a positive share of the traffic."""
        return [t for t in self.types if self.mix.get(t, 0.0) > 0]

    def pi(self) -> np.ndarray:
        """Type fractions in the model's type order."""
        return np.array([self.mix.get(t, 0.0) for t in self.types])

    def with_budget(self, gpus: int) -> Problem:
        return replace(self, gpus=gpus)

    def with_mix(self, mix: Mapping[str, float]) -> Problem:
        full = {t: float(mix.get(t, 0.0)) for t in self.types}
        return replace(self, mix=full)


def workload_mix(workload: ResolvedWorkload, seed: int = 0) -> dict[str, float]:
    """The workload's type fractions: its ``mix``, or (trace replay) counted over a sample."""
    model = workload.model
    if workload.spec.mix is not None:
        return {t: float(workload.spec.mix.get(t, 0.0)) for t in model.type_names}
    reqs = generate(workload, n=MIX_SAMPLE, seed=seed)
    counts = {t: 0 for t in model.type_names}
    for r in reqs:
        counts[r.type] += 1
    return {t: c / len(reqs) for t, c in counts.items()}


def sample_requests(workload: ResolvedWorkload, k: int, seed: int = 0) -> dict[str, tuple[ResolvedWork, ...]]:
    """``k`` requests of every type, drawn with the workload's own size distributions (and
    trace sizes, for a replayed trace)."""
    out: dict[str, tuple[ResolvedWork, ...]] = {}
    for i, t in enumerate(workload.model.type_names):
        reqs = generate(workload, n=k, mix={t: 1.0}, seed=seed + 7919 * (i + 1))
        out[t] = tuple(r.work for r in reqs)
    return out


def make_problem(workload: ResolvedWorkload, gpu: GPUKind, gpus: int, *, samples: int = 128,
                 seed: int = 0, mix: Mapping[str, float] | None = None) -> Problem:
    """A planning problem for ``workload`` on ``gpus`` GPUs of kind ``gpu``."""
    use = dict(mix) if mix is not None else workload_mix(workload, seed)
    full = {t: float(use.get(t, 0.0)) for t in workload.model.type_names}
    return Problem(workload.model, gpu, gpus, full, sample_requests(workload, samples, seed), workload)
