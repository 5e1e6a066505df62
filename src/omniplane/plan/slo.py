"""Latency targets per request type from a workload's SLO policy (Cornfigurator section 3.2).

* ``isolated_percentile`` (the paper's default, section 6.1): serve the type alone; among its
  deployments (every Keep/Merge partition of its path, every executor config per node) take
  the highest-throughput one (fewest GPU-seconds per request: a balanced allocation of
  continuous GPUs), and the ``percentile`` of its first-response latency at full occupancy,
  processing only (the profiler subtracts queueing, section 5.1), times ``multiplier``.
* ``solo_multiplier`` (HorizonServe section 6.1): ``multiplier`` x the ``percentile`` of the
  solo latency on one idle executor (``omniplane.perf.solo``).
* ``explicit``: the workload's ``targets_ms``.

``overrides`` (the CLI's ``--slo t=800ms``) replace single types' targets afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from omniplane.perf import CostModel
from omniplane.perf.solo import default_solo_config, solo_latencies
from omniplane.plan.costs import CostTable
from omniplane.plan.enumerate import partitions
from omniplane.plan.flow import Candidates
from omniplane.plan.logical import Subplan, compose
from omniplane.plan.montecarlo import node_states, route_latency
from omniplane.plan.routing import node_share
from omniplane.spec import ExplicitSLO, GeneratorKind, IsolatedPercentileSLO, SLOPolicy, SoloMultiplierSLO

DEFAULT_TRANSFER_S = 0.010  # plans' default transfer_ms (Cornfigurator section 5.2: ~10 ms median)


@dataclass(frozen=True)
class Targets:
    """Latency target per type (seconds) and how each was obtained."""

    seconds: Mapping[str, float]
    how: Mapping[str, str]

    def array(self, types: list[str]) -> np.ndarray:
        return np.array([self.seconds.get(t, np.inf) for t in types])


def parse_duration(text: str) -> float:
    """'800ms', '3s', '1.5' (seconds) -> seconds."""
    s = text.strip().lower()
    try:
        if s.endswith("ms"):
            return float(s[:-2]) / 1e3
        return float(s[:-1]) if s.endswith("s") else float(s)
    except ValueError:
        raise ValueError(f"cannot read a duration from {text!r} (expected e.g. 800ms or 3s)") from None


def parse_overrides(text: str, types: list[str]) -> dict[str, float]:
    """``'ti2t=800ms,ti2a=3s'`` -> seconds per type."""
    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--slo item {item!r} must look like TYPE=DURATION (e.g. ti2t=800ms)")
        if name not in types:
            known = ", ".join(types)
            raise ValueError(f"--slo names unknown request type {name!r} (expected one of: {known})")
        out[name] = parse_duration(value)
        if out[name] <= 0:
            raise ValueError(f"--slo target for {name!r} must be positive, got {value!r}")
    return out


def resolve_targets(policy: SLOPolicy, table: CostTable, cost: CostModel,
                    overrides: Mapping[str, float] | None = None, transfer_s: float = DEFAULT_TRANSFER_S,
                    seed: int = 0) -> Targets:
    types = table.types
    seconds: dict[str, float] = {}
    how: dict[str, str] = {}
    if isinstance(policy, ExplicitSLO):
        for t in types:
            if t in policy.targets_ms:
                seconds[t] = policy.targets_ms[t] / 1e3
                how[t] = "explicit"
    elif isinstance(policy, SoloMultiplierSLO):
        model, gpu = table.model, table.problem.gpu
        cfg = default_solo_config(model, cost, gpu)
        for t in types:
            solo = solo_latencies(model, cost, cfg, t, n=len(table.problem.samples[t]), seed=seed)
            seconds[t] = policy.multiplier * float(np.percentile(solo.samples, policy.percentile))
            how[t] = f"{policy.multiplier:g} x solo p{policy.percentile:g} (tp {cfg.tp})"
    else:
        assert isinstance(policy, IsolatedPercentileSLO)
        alone = table if not _pads(table) else CostTable(table.problem, cost, pad=False)
        for t in types:
            lat, desc = isolated_best(alone, t, transfer_s)
            seconds[t] = policy.multiplier * float(np.percentile(lat, policy.percentile))
            how[t] = f"p{policy.percentile:g} x {policy.multiplier:g} of {desc}"
    for t, s in (overrides or {}).items():
        seconds[t] = s
        how[t] = "override"
    return Targets(seconds, how)


def _pads(table: CostTable) -> bool:
    """True when some component batches pad to the largest member (a DiT or a VAE)."""
    return any(c.generator in (GeneratorKind.DIT, GeneratorKind.VAE) for c in table.model.components)


def isolated_best(table: CostTable, type_name: str, transfer_s: float) -> tuple[np.ndarray, str]:
    """Latency samples (at full occupancy) of the highest-throughput deployment of one type
    served alone, and a description of that deployment."""
    model = table.model
    t = table.types.index(type_name)
    path = table.paths[type_name]
    best: tuple[float, float, tuple[frozenset[str], ...], list[int]] | None = None
    for nodes in partitions(model, frozenset(path)):
        gpu_s = 0.0
        choice: list[int] = []
        for node in nodes:
            nc = table.node(node)
            if not nc.options:
                gpu_s = np.inf
                break
            per = nc.s_full[:, t] * nc.tp
            choice.append(int(np.argmin(per)))
            gpu_s += float(per.min())
        if not np.isfinite(gpu_s):
            continue
        lat = _latency(table, t, nodes, choice, transfer_s)
        key = (gpu_s, float(np.median(lat)))
        if best is None or key < best[:2]:
            best = (key[0], key[1], nodes, choice)
    if best is None:
        raise ValueError(f"no deployment of {type_name!r} fits on {table.problem.gpu.name}")
    _, _, nodes, choice = best
    lat = _latency(table, t, nodes, choice, transfer_s)
    desc = ", ".join(f"{table.node(n).name} tp{table.node(n).options[o][0]} b{table.node(n).options[o][1]}"
                     for n, o in zip(nodes, choice, strict=True))
    return lat[0], f"[{desc}] saturated by this type alone, {1 / best[0]:.2f} req/s per GPU"


def _latency(table: CostTable, t: int, nodes: tuple[frozenset[str], ...], choice: list[int],
             transfer_s: float) -> np.ndarray:
    """Latency samples ``[1, K]`` with every node saturated by type ``t`` alone (each executor
    receives its full-occupancy throughput); components of a merged node take the occupancy
    Little's law gives them at that rate (montecarlo.node_states)."""
    model = table.model
    n_types = len(table.types)
    route = tuple(range(len(nodes)))
    routes = tuple(((route, 0),) if i == t else () for i in range(n_types))
    lp = compose((Subplan(nodes, routes, 1),), n_types)
    costs = tuple(table.node(n) for n in nodes)
    p = np.zeros((1, n_types, 1))
    p[0, t, 0] = 1.0
    opt = np.array([choice])
    lam = np.zeros((1, len(nodes), n_types))
    for i, nc in enumerate(costs):
        lam[0, i, t] = 1.0 / nc.s_full[choice[i], t]
    cands = Candidates(lp, costs, p, node_share(lp, p), opt, np.ones_like(opt), np.zeros(1, dtype=int),
                       np.ones(1), np.ones(1, dtype=int))
    state = node_states(cands, table, lam)
    del model
    return route_latency(table, cands, state, t, lp.routes[t][0], transfer_s)
