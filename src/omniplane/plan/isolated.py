"""The deployment a request type gets served alone, and its latency samples there: the basis of
the ``isolated_percentile`` SLO policy (Cornfigurator section 6.1; resolved by
:func:`omniplane.slo.resolve.resolve_targets`), on the planner's cost table and latency model."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from omniplane.perf import CostModel
from omniplane.plan.costs import CostTable
from omniplane.plan.enumerate import partitions
from omniplane.plan.flow import Candidates
from omniplane.plan.logical import Node, Subplan, compose
from omniplane.plan.montecarlo import node_states, route_latency
from omniplane.plan.routing import node_share
from omniplane.plan.space import Space
from omniplane.spec import GeneratorKind


def unpadded(table: CostTable, cost: CostModel) -> CostTable:
    """``table``, or, when some component batches pad to the largest member (a DiT or a VAE),
    the same table built with ``pad=False``: the table the isolated deployments are measured on."""
    return table if not _pads(table) else CostTable(table.problem, cost, pad=False, fit=table.fit)


def _pads(table: CostTable) -> bool:
    """True when some component batches pad to the largest member (a DiT or a VAE)."""
    return any(c.generator in (GeneratorKind.DIT, GeneratorKind.VAE) for c in table.model.components)


@dataclass(frozen=True)
class Deployment:
    """A candidate isolated deployment: ``route``, the nodes the type passes in order, and
    ``idle``, nodes the runtime builds beside them that the type never uses (a whole-pipeline
    runtime: their GPUs are paid all the same). ``whole``: one replica per node, throughput the
    slowest route node's, per GPU over every node's GPUs (a runtime's deployment as loaded);
    else (the ideal space) a balanced continuous allocation: the sum of GPU-seconds per request."""

    route: tuple[Node, ...]
    idle: tuple[Node, ...] = ()
    whole: bool = False


def deployments(table: CostTable, type_name: str, space: Space | None = None) -> list[Deployment]:
    """The deployments that can serve ``type_name`` alone in ``space``: every Keep/Merge
    partition of its path in the ideal space (``space`` None or full); in a space of listed
    logical plans (a runtime's), every one-deployment plan serving the type, whole (its nodes as
    the runtime builds them: whole stages, shared-GPU nodes, idle stages included)."""
    if space is None or space.logical is None:
        return [Deployment(nodes) for nodes in partitions(table.model, frozenset(table.paths[type_name]))]
    t = table.types.index(type_name)
    out: list[Deployment] = []
    for lp in space.logical:
        if len(lp.subplans) != 1:
            continue
        for route in lp.routes[t]:
            d = Deployment(tuple(lp.nodes[i] for i in route),
                           tuple(n for i, n in enumerate(lp.nodes) if i not in route), whole=True)
            if d not in out:
                out.append(d)
    return out


def _cheapest(table: CostTable, t: int, d: Deployment) -> tuple[float, list[int]] | None:
    """``d``'s GPUs per request/s of type ``t`` and each route node's option (None: a node does
    not fit)."""
    costs = [table.node(n) for n in d.route]
    if any(not nc.options for nc in costs) or any(not table.node(n).options for n in d.idle):
        return None
    if not d.whole:
        per = [nc.s_full[:, t] * nc.tp for nc in costs]
        return float(sum(p.min() for p in per)), [int(np.argmin(p)) for p in per]
    idle_gpus = sum(int(np.min(table.node(n).tp)) for n in d.idle)
    best: tuple[float, list[int]] | None = None
    for combo in itertools.product(*(range(len(nc.options)) for nc in costs)):
        gpus = idle_gpus + sum(int(nc.tp[o]) for nc, o in zip(costs, combo, strict=True))
        slowest = max(float(nc.s_full[o, t]) for nc, o in zip(costs, combo, strict=True))
        if best is None or gpus * slowest < best[0]:
            best = (gpus * slowest, list(combo))
    return best


def isolated_best(table: CostTable, type_name: str, transfer_s: float,
                  candidates: Iterable[Deployment] | None = None) -> tuple[np.ndarray, str]:
    """Latency samples (at full occupancy) of the highest-throughput deployment of one type
    served alone, and a description of that deployment. ``candidates``: the deployments to
    choose among (:func:`deployments`; default every partition of the type's path)."""
    t = table.types.index(type_name)
    best: tuple[float, float, tuple[frozenset[str], ...], list[int]] | None = None
    for d in (candidates if candidates is not None else deployments(table, type_name)):
        got = _cheapest(table, t, d)
        if got is None:
            continue
        gpu_s, choice = got
        nodes = d.route
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
