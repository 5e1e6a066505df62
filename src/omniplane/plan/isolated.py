"""The deployment a request type gets served alone, and its latency samples there: the basis of
the ``isolated_percentile`` SLO policy (Cornfigurator section 6.1; resolved by
:func:`omniplane.slo.resolve.resolve_targets`), on the planner's cost table and latency model."""

from __future__ import annotations

import numpy as np

from omniplane.perf import CostModel
from omniplane.plan.costs import CostTable
from omniplane.plan.enumerate import partitions
from omniplane.plan.flow import Candidates
from omniplane.plan.logical import Subplan, compose
from omniplane.plan.montecarlo import node_states, route_latency
from omniplane.plan.routing import node_share
from omniplane.spec import GeneratorKind


def unpadded(table: CostTable, cost: CostModel) -> CostTable:
    """``table``, or, when some component batches pad to the largest member (a DiT or a VAE),
    the same table built with ``pad=False``: the table the isolated deployments are measured on."""
    return table if not _pads(table) else CostTable(table.problem, cost, pad=False)


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
    state = node_states(cands, table, lam, queueing=False, spread=False)  # processing only (section 5.1)
    del model
    return route_latency(table, cands, state, t, lp.routes[t][0], transfer_s)
