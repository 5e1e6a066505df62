"""Monte Carlo latency and goodput of physical plans (Algorithm 2, the second phase).

Each candidate runs at ``alpha x R_d``. Per node and hosted component the phase picks the
occupancy that Little's law makes self-consistent (the smallest level ``k`` whose occupancy
``sum_t lambda_t residence_t(k) / maxbatch_t`` fits ``FILLS[k]``; the bottleneck ends at full
occupancy): this is Cornfigurator's occupancy-aware latency scaling (section 5.2), with
non-bottleneck nodes running smaller batches than their configured maximum.

The sampled requests of each type (common random numbers for every candidate) are routed
along every route of their type and their first-response latency is composed over the path:

* a component starts when its predecessors release it (first output along a streaming edge,
  completion otherwise) plus the plan's transfer delay when they sit on different nodes
  (section 5.2, "communication overhead");
* it then waits for the step in progress with probability of the executor being busy
  (half a step on average) and is served for its part's time, stretched by the share of the
  executor other hosted components take (a merged executor runs them in turns);
* an encoder's CPU preprocessing overlaps that wait (section 5.2, CPU-GPU overlap): it adds
  ``max(cpu, wait)``; two encoders of one request on one executor run one after the other.

Queueing beyond the step in progress is not modelled (as in the paper); the simulator phase
refines it. Attainment of type ``t`` is the route-probability-weighted share of samples within
``L_t``; goodput ``g_t = alpha R_d pi_t attainment_t``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from omniplane.plan.costs import FILLS, CostTable
from omniplane.plan.flow import Candidates
from omniplane.spec import ComponentKind, FirstResponse, ModelSpec

MAX_INTERFERENCE = 0.8  # assumption: cap on the executor share other components take (stretch <= 5x)


State = dict[tuple[int, str], tuple[np.ndarray, np.ndarray, np.ndarray]]


def evaluate(cands: Candidates, table: CostTable, pi: np.ndarray, slo_s: np.ndarray, alpha: float,
             transfer_s: float) -> tuple[np.ndarray, np.ndarray]:
    """``(goodput[C, T], attainment[C, T])`` of every candidate (types with ``pi_t = 0`` get 0)."""
    rate = alpha * cands.rate
    lam = rate[:, None, None] * cands.share[cands.vec] * pi[None, None, :] / cands.cnt[:, :, None]
    state = node_states(cands, table, lam)
    good = np.zeros((len(cands), len(pi)))
    attain = np.zeros((len(cands), len(pi)))
    for t, routes in enumerate(cands.lp.routes):
        if pi[t] <= 0:
            continue
        probs = cands.p[cands.vec, t, :]  # [C, W]
        for r, route in enumerate(routes):
            lat = route_latency(table, cands, state, t, route, transfer_s)
            attain[:, t] += probs[:, r] * (lat <= slo_s[t]).mean(axis=1)
        good[:, t] = rate * pi[t] * attain[:, t]
    return good, attain


def node_states(cands: Candidates, table: CostTable, lam: np.ndarray) -> State:
    """Per (node instance, component): occupancy level [C], wait before service [C] and
    stretch of service [C], given ``lam[C, m, T]`` arrivals per second per executor.

    The wait is the residual of the step in progress (each hosted component's busy share times
    half its step) plus one step of every other hosted component with work (the executor runs
    its components in turns, ``omniplane.sim.executor``)."""
    arr = table.arrays()
    n_c = len(cands)
    rows = np.arange(n_c)
    state: State = {}
    for n, nc in enumerate(cands.costs):
        opt = cands.opt[:, n]
        lam_n = lam[:, n, :]
        betas: dict[str, np.ndarray] = {}
        levels: dict[str, np.ndarray] = {}
        steps: dict[str, np.ndarray] = {}
        for c in nc.comps:
            pid = nc.part[c][opt]  # [C, T, L]
            res = np.where(pid >= 0, arr.residence[np.maximum(pid, 0)], 0.0)
            bmax = np.maximum(nc.bmax[c][opt], 1)  # [C, T]
            conc = np.einsum("ct,ctl->cl", lam_n, res)  # requests in service at each level
            served = lam_n * (pid[:, :, 0] >= 0)
            share = served / np.maximum(served.sum(axis=1, keepdims=True), 1e-300)
            room = np.maximum(1.0, (share * bmax).sum(axis=1)[:, None] * FILLS[None, :])  # [C, L]
            fits = conc <= room
            k = np.where(fits.any(axis=1), fits.argmax(axis=1), len(FILLS) - 1)
            levels[c] = k
            pk = pid[rows, :, k]  # [C, T]
            ok = pk >= 0
            betas[c] = (lam_n * np.where(ok, arr.cost[np.maximum(pk, 0)], 0.0)).sum(axis=1)
            w = np.where(ok, lam_n, 0.0)
            steps[c] = (w * arr.step[np.maximum(pk, 0)]).sum(axis=1) / np.maximum(w.sum(axis=1), 1e-12)
        rho = sum(betas.values(), np.zeros(n_c))
        scale = np.where(rho > 1.0, 1.0 / np.maximum(rho, 1e-12), 1.0)  # busy shares sum to <= 1
        residual = sum((np.minimum(betas[c], 1.0) * scale * steps[c] / 2 for c in nc.comps), np.zeros(n_c))
        for c in nc.comps:
            turns = sum((np.minimum(betas[o], 1.0) * steps[o] for o in nc.comps if o != c), np.zeros(n_c))
            other = np.minimum(rho - betas[c], MAX_INTERFERENCE)
            state[(n, c)] = (levels[c], residual + turns, 1.0 / (1.0 - other))
    return state


def route_latency(table: CostTable, cands: Candidates, state: State, t: int, route: tuple[int, ...],
                  transfer_s: float) -> np.ndarray:
    """First-response latency ``[C, K]`` of type ``t``'s samples along one route."""
    arr = table.arrays()
    tname = table.types[t]
    path = table.paths[tname]
    where = {c: n for n in route for c in cands.lp.nodes[n] if c in path}
    rows = np.arange(len(cands))

    def service(c: str) -> Service:
        n = where[c]
        level, wait, stretch = state[(n, c)]
        pid = cands.costs[n].part[c][cands.opt[:, n], t, :][rows, level]  # [C]
        s = stretch[:, None]
        return Service(arr.cpu[pid], wait[:, None], s * arr.first[pid], s * arr.done[pid])

    return path_latency(table.model, tname, path, where, service, transfer_s)


@dataclass(frozen=True)
class Service:
    """One component's contribution for a batch of samples (arrays broadcast together)."""

    cpu: np.ndarray  # CPU preprocessing (encoders), overlapping the wait
    wait: np.ndarray  # for the step in progress
    first: np.ndarray  # service until the first output
    done: np.ndarray  # service until done


def path_latency(model: ModelSpec, type_name: str, path: list[str], where: Mapping[str, int],
                 service: Callable[[str], Service], transfer_s: float) -> np.ndarray:
    """First-response latency of a type's samples: components composed along the path
    (module docstring); ``where[c]`` is the node instance serving ``c``."""
    first: dict[str, np.ndarray] = {}
    done: dict[str, np.ndarray] = {}
    enc_free: dict[int, np.ndarray] = {}
    for c in path:
        n = where[c]
        sv = service(c)
        start: np.ndarray = np.zeros(1)
        for pred in path:
            edge = next((e for e in model.component(pred).edges if e.to == c), None)
            if edge is None:
                continue
            rel = first[pred] if edge.streaming else done[pred]
            if where[pred] != n:
                rel = rel + transfer_s
            start = np.maximum(start, rel)
        if model.component(c).kind is ComponentKind.ENCODER:
            if n in enc_free:
                start = np.maximum(start, enc_free[n])
            end = start + np.maximum(sv.cpu, sv.wait) + sv.first
            enc_free[n] = end
            first[c] = done[c] = end
        else:
            first[c] = start + sv.wait + sv.first
            done[c] = start + sv.wait + sv.done
    sink = path[-1]
    metric = model.request_type(type_name).first_response
    return done[sink] if metric is FirstResponse.E2E else first[sink]
