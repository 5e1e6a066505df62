"""Per-type latency targets (seconds) from a workload's SLO policy.

* ``explicit``: the workload's ``targets_ms``.
* ``solo_multiplier``: multiplier x the solo ``percentile`` first-response latency of each type
  alone on one executor of every component (``omniplane.perf.solo``, HorizonServe 6.1).
* ``isolated_percentile``: Cornfigurator's target is the ``percentile`` latency of the best
  isolated configuration. Approximation used here: the same solo latency distribution
  (``default_solo_config``: every component on one executor, the smallest TP that fits), at
  that percentile, times the multiplier. A planner that knows the best isolated configuration
  may pass its own targets instead (``--slo``).

Overrides (``TYPE=MS``) replace single types.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from omniplane.perf import CostModel
from omniplane.perf.solo import default_solo_config, solo_latencies
from omniplane.spec import ExplicitSLO, GPUKind, IsolatedPercentileSLO, ModelSpec, SLOPolicy

SOLO_SAMPLES = 200  # assumption: requests per type for the solo latency percentiles (seeded)


def slo_targets(
    model: ModelSpec,
    policy: SLOPolicy,
    gpu: GPUKind | None,
    *,
    cost: CostModel | None = None,
    overrides: Mapping[str, float] | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """Target first-response latency per request type, in seconds."""
    out: dict[str, float] = {}
    if isinstance(policy, ExplicitSLO):
        out = {t: ms / 1e3 for t, ms in policy.targets_ms.items()}
    else:
        if gpu is None:
            raise ValueError(f"SLO policy {policy.policy} needs a GPU kind for solo latencies")
        cost = cost or CostModel(model)
        cfg = default_solo_config(model, cost, gpu)
        q = policy.percentile
        for t in model.type_names:
            solo = solo_latencies(model, cost, cfg, t, n=SOLO_SAMPLES, seed=seed)
            out[t] = policy.multiplier * float(np.percentile(solo.samples, q))
    for t, ms in (overrides or {}).items():
        if t not in model.type_names:
            raise ValueError(
                f"SLO override for unknown request type {t!r} "
                f"(model {model.name} has: {', '.join(model.type_names)})"
            )
        out[t] = ms / 1e3
    return out


def describe(policy: SLOPolicy) -> str:
    if isinstance(policy, ExplicitSLO):
        return "explicit targets"
    kind = "isolated (approximated by solo)" if isinstance(policy, IsolatedPercentileSLO) else "solo"
    return f"{policy.multiplier:g} x {kind} p{policy.percentile:g}"


def parse_overrides(items: list[str]) -> dict[str, float]:
    """``["ti2t=500", ...]`` -> ``{"ti2t": 500.0}`` (milliseconds)."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            ms = float(value)
        except ValueError:
            ms = float("nan")
        if not sep or not name or not ms > 0:
            raise ValueError(f"--slo expects TYPE=MILLISECONDS with a positive number (got {item!r})")
        out[name] = ms
    return out
