"""Latency targets for a simulation from a workload's SLO policy.

``explicit`` targets are used as given; ``solo_multiplier`` is multiplier x the solo
percentile first-response latency of each type alone on one executor of the GPU kind
(HorizonServe's 5 x p95, via :mod:`omniplane.perf.solo`). ``isolated_percentile``
(Cornfigurator's default) needs the planner's isolated per-type configurations; here it falls
back to the solo latency at that percentile times its multiplier, and says so in its name.
"""

from __future__ import annotations

import numpy as np

from omniplane.perf import CostModel
from omniplane.perf.solo import default_solo_config, solo_latencies
from omniplane.spec import GPUKind, ResolvedWorkload


def targets_for(workload: ResolvedWorkload, cost: CostModel, gpu: GPUKind, n: int = 200,
                seed: int = 0) -> dict[str, float]:
    """Seconds per request type of the workload's model."""
    slo, model = workload.spec.slo, workload.model
    if slo.policy == "explicit":
        return {t: ms / 1e3 for t, ms in slo.targets_ms.items()}
    cfg = default_solo_config(model, cost, gpu)
    out = {}
    for t in model.type_names:
        samples = solo_latencies(model, cost, cfg, t, n=n, seed=seed).samples
        out[t] = float(np.percentile(samples, slo.percentile)) * slo.multiplier
    return out
