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
  (half a step on average) and is served for its part's time; on a merged executor the
  other hosted components take turns between its steps (:func:`node_states`), so every
  further step of a request (an LLM's next token, a DiT's next denoising step) comes later by
  their mean turn;
* an encoder's CPU preprocessing overlaps that wait (section 5.2, CPU-GPU overlap): it adds
  ``max(cpu, wait)``; two encoders of one request on one executor run one after the other.
* when the executor component's batch limit is full the request waits for a slot: the mean
  admission queue of a birth-death chain of the requests it holds (:func:`admission_queue`,
  an approximation: M/M/c with occupancy-dependent service, Allen-Cunneen's ``(c_a^2 +
  c_s^2) / 2`` for the arrival and service variability); the paper models no queueing.
* each sample draws its wait from the wait's law (``omniplane.plan.waits``: 0 with the
  probability that nothing is ahead, else spread out, each part's mean kept exactly), not the
  mean for every sample; the draws are common random numbers (the same for every candidate).

The simulator phase refines the rest (inter-type interactions, bursts beyond the chain).
Attainment of type ``t`` is the route-probability-weighted share of samples within
``L_t``; goodput ``g_t = alpha R_d pi_t attainment_t``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from omniplane.plan.costs import FILLS, CostTable, NodeCosts, PartArrays
from omniplane.plan.flow import Candidates
from omniplane.plan.waits import WaitLaw, erlang_c, wait_draws
from omniplane.spec import ComponentKind, FirstResponse, ModelSpec


class NodeState(NamedTuple):
    """One component on one node instance, per candidate ``[C]``."""

    level: np.ndarray  # occupancy level (index into FILLS)
    wait: np.ndarray  # mean wait before service
    turns: np.ndarray  # the other hosted components' delay between two of its steps
    law: WaitLaw | None  # the wait's law (None: every sample waits the mean)


State = dict[tuple[int, str], NodeState]


def evaluate(cands: Candidates, table: CostTable, pi: np.ndarray, slo_s: np.ndarray, alpha: float,
             transfer_s: float, samples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(goodput[C, T], attainment[C, T])`` of every candidate (types with ``pi_t = 0`` get 0),
    over the first ``samples`` sampled requests of each type (None: all of them)."""
    rate = alpha * cands.rate
    lam = rate[:, None, None] * cands.share[cands.vec] * pi[None, None, :] / cands.cnt[:, :, None]
    state = node_states(cands, table, lam)
    good = np.zeros((len(cands), len(pi)))
    attain = np.zeros((len(cands), len(pi)))
    for t, routes in enumerate(cands.lp.routes):
        if pi[t] <= 0:
            continue
        probs = cands.p[cands.vec, t, :]  # [C, W]
        cache: dict[tuple[int, str], Service] = {}
        for r, route in enumerate(routes):
            lat = route_latency(table, cands, state, t, route, transfer_s, cache, samples)
            attain[:, t] += probs[:, r] * (lat <= slo_s[t]).mean(axis=1)
        good[:, t] = rate * pi[t] * attain[:, t]
    return good, attain


def node_states(cands: Candidates, table: CostTable, lam: np.ndarray, *, queueing: bool = True,
                spread: bool = True) -> State:
    """Per (node instance, component): occupancy level [C], wait before service [C] and the
    delay other hosted components add between two of its steps [C], given ``lam[C, m, T]``
    arrivals per second per executor.

    A merged executor runs its components in turns, one step each (``omniplane.sim.executor``):
    between two steps of component ``c`` every other component ``j`` that has work runs one
    step of mean length ``tau_j``. ``j`` has work with probability ``h_j = 1 - exp(-n_j)``
    (``n_j``: requests it holds, Little's law, Poisson occupancy), so each further step of
    ``c`` is ``T_c = sum_{j != c} h_j tau_j`` later. A request arriving at ``c`` waits for the
    residual of the step in progress and then, if that step is ``c``'s own, every other
    component's turn, else on average half of them. Residence grows with
    the turns, so occupancy, steps and turns are iterated to a fixed point (``TURN_PASSES``).

    With ``spread`` each state carries the wait's law (:class:`~omniplane.plan.waits.WaitLaw`:
    busy with the executor's busy share, queued for it with Erlang C's probability at the
    full-batch utilisation, waiting for a slot with the chain's ``P(N >= B)``), whose mean is
    the mean wait; without, every sample waits the mean (the SLO resolver's isolated runs)."""
    arr = table.arrays()
    n_c = len(cands)
    rows = np.arange(n_c)
    ca2 = arrival_cv2(table)
    state: State = {}
    for n, nc in enumerate(cands.costs):
        opt = cands.opt[:, n]
        lam_n = lam[:, n, :]
        servers = np.maximum(cands.cnt[:, n], 1)
        turns = {c: np.zeros(n_c) for c in nc.comps}
        passes = TURN_PASSES if len(nc.comps) > 1 else 1
        for k in range(passes):  # the admission queue does not feed back: computed on the last pass
            levels, betas, steps, held, queue, full, resid, p_full = occupancy(
                nc, opt, lam_n, arr, rows, turns, ca2, queueing and k == passes - 1, servers)
            turns = {c: sum((held[j] * steps[j] for j in nc.comps if j != c), np.zeros(n_c))
                     for c in nc.comps}
        rho = sum(betas.values(), np.zeros(n_c))
        scale = np.where(rho > 1.0, 1.0 / np.maximum(rho, 1e-12), 1.0)  # busy shares sum to <= 1
        busy = {c: np.minimum(betas[c], 1.0) * scale for c in nc.comps}
        residual = sum((busy[c] * resid[c] for c in nc.comps), np.zeros(n_c))  # P-K: E[S^2] / (2 E[S])
        queued = np.zeros(n_c)
        p_queued = np.zeros(n_c)
        if queueing:  # the executor's load of its full-batch capacity (step_queue_factor)
            util = np.minimum(sum(full.values(), np.zeros(n_c)), 1.0)
            p_queued = erlang_c(util, servers)
            factor = step_queue_factor(util, servers, p_queued)
            with np.errstate(invalid="ignore"):  # 0 x inf: no residual, no queue
                queued = np.where(factor > 1.0, residual * (factor - 1.0), 0.0)
        loaded = np.minimum(rho, 1.0)
        for c in nc.comps:
            own = betas[c] / np.maximum(rho, 1e-12)  # the step in progress is c's own
            turn = loaded * (1.0 + own) / 2 * turns[c]
            law = WaitLaw(loaded, residual, turn, p_queued, queued, p_full[c], queue[c]) if spread else None
            wait = residual + queued + turn + queue[c]
            state[(n, c)] = NodeState(levels[c], wait, turns[c], law)
    return state


TURN_PASSES = 3  # fixed-point passes of occupancy and turns on merged executors (converges in 2-3)


def step_queue_factor(util: np.ndarray, servers: np.ndarray, erlang: np.ndarray | None = None) -> np.ndarray:
    """What the wait for the step in progress becomes once queueing for the executor is priced
    (an approximation, labelled as one; docs/guides/plan.md "Monte Carlo queueing"):
    Pollaczek-Khinchine's M/G/1 wait, the residual over ``1 - u``, with the executor's step as
    the service, and for a node's ``c`` executors (dispatch to the least loaded, as the
    simulator and Ray Serve's router do) M/G/c by the Erlang C ratio ``C(c, c u) / (c u)`` of
    M/M/c to M/M/1 at the same utilisation ``u``. ``u`` is the executor's busy share at full
    batch (its offered work over its full-batch capacity, the flow phase's notion), capped at 1:
    the busy share at the Little's-law level is not used, because on merged executors it sums
    past 1 on plans the simulator serves well
    (docs/decisions/0007-busy-share-at-the-littles-law-level.md and
    0008-work-conservation-step.md). At least 1 (never below the residual alone); infinite at
    ``u >= 1``. Copies of a subplan side by side are separate nodes (``c = 1`` each, a random
    split), so they wait longer than the same executors pooled in one node. ``erlang``:
    ``C(c, c u)`` when the caller already has it."""
    u = np.clip(util, 0.0, 1.0)
    if not len(u):  # no candidates (an empty chunk of a space)
        return np.ones(0)
    a = servers.astype(int) * u
    with np.errstate(divide="ignore", invalid="ignore"):
        c_wait = erlang_c(u, servers) if erlang is None else erlang
        ratio = np.where(u > 0, c_wait / np.maximum(a, 1e-300), 0.0)
        factor = np.where(u < 1.0, ratio / (1.0 - u), np.inf)
    return np.maximum(factor, 1.0)


def occupancy(nc: NodeCosts, opt: np.ndarray, lam_n: np.ndarray, arr: PartArrays, rows: np.ndarray,
               turns: dict[str, np.ndarray], ca2: float, queueing: bool,
               servers: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], ...]:
    """Per hosted component: occupancy level (the smallest whose room holds the requests in
    service, Little's law), busy share, mean step, requests held, full-batch busy share, mean
    step residual and, with ``queueing``, the mean wait for admission (:func:`admission_queue`,
    Allen-Cunneen: the M/M queue's wait times ``(c_a^2 + c_s^2) / 2``) and the probability that
    a request waits for it (the chain's ``P(N >= B)``, pooled likewise), with each request's
    residence lengthened by ``turns[c]`` per further step.

    ``servers[C]``: the node's executors. A request goes to the least-loaded one (the
    simulator's dispatch, ``sim.topology``; Ray Serve's router likewise), so the admission
    queue is the node's pooled one: the chain of all the requests its ``servers`` executors
    hold, ``servers x B`` slots, each held request leaving at the per-executor rate of the
    occupancy ``N / servers`` (balanced by the dispatch: an approximation, labelled as one),
    which is :func:`admission_queue` on ``servers x`` the concurrency and the slots (at most
    ``CHAIN_MAX`` slots: past that, as many executors as fit are pooled). The wait is that
    queue over the node's arrivals (Little). ``None``: one executor (a random split)."""
    levels: dict[str, np.ndarray] = {}
    full: dict[str, np.ndarray] = {}
    resid: dict[str, np.ndarray] = {}
    betas: dict[str, np.ndarray] = {}
    steps: dict[str, np.ndarray] = {}
    held: dict[str, np.ndarray] = {}
    waits: dict[str, np.ndarray] = {}
    p_full: dict[str, np.ndarray] = {}
    for c in nc.comps:
        pid = nc.part[c][opt]  # [C, T, L]
        safe = np.maximum(pid, 0)
        extra = (arr.steps_mean[safe] - 1.0) * turns[c][:, None, None]
        res = np.where(pid >= 0, arr.residence[safe] + extra, 0.0)
        bmax = np.maximum(nc.bmax[c][opt], 1)  # [C, T]
        conc = np.einsum("ct,ctl->cl", lam_n, res)  # requests in service at each level
        served = lam_n * (pid[:, :, 0] >= 0)
        lam_c = served.sum(axis=1)
        share = served / np.maximum(lam_c[:, None], 1e-300)
        slots = (share * bmax).sum(axis=1)
        if c in nc.kv_ctx:  # an LLM: its cache holds the mix it holds, at their mean context
            slots = kv_slots(served * res[:, :, -1], nc.kv_ctx[c][opt], nc.batch[opt], slots)
        room = np.maximum(1.0, slots[:, None] * FILLS[None, :])  # [C, L]
        fits = conc <= room
        queue = np.zeros(len(rows))
        p_full[c] = np.zeros(len(rows))
        if queueing:  # requests waiting at the node, per executor (the pooled queue, see above)
            # the chain has CHAIN_MAX states below the limit: past that, fewer executors are pooled
            # (a conservative cut, labelled: fewer servers queue more, never less than one executor)
            pool = (np.ones(len(rows)) if servers is None
                    else np.clip(np.floor(CHAIN_MAX / np.maximum(slots, 1.0)), 1.0, servers.astype(float)))
            queue, p_full[c] = admission_chain(conc * pool[:, None], slots * pool)
            queue = queue / pool
        k = np.where(fits.any(axis=1), fits.argmax(axis=1), len(FILLS) - 1)
        levels[c] = k
        top = pid[:, :, -1]  # busy share at the fullest level: the load of the full-batch capacity
        full[c] = (lam_n * np.where(top >= 0, arr.cost[np.maximum(top, 0)], 0.0)).sum(axis=1)
        pk = pid[rows, :, k]  # [C, T]
        ok = pk >= 0
        betas[c] = (lam_n * np.where(ok, arr.cost[np.maximum(pk, 0)], 0.0)).sum(axis=1)
        w = np.where(ok, lam_n, 0.0)
        steps[c] = (w * arr.step[np.maximum(pk, 0)]).sum(axis=1) / np.maximum(w.sum(axis=1), 1e-12)
        # mean residual of a step in progress, E[S^2] / (2 E[S]), steps mixed over the types by
        # the steps each type runs (w x cost / step; a type's steps are its busy share over its step)
        sp = np.maximum(pk, 0)
        ws = np.where(ok, lam_n * arr.cost[sp] / np.maximum(arr.step[sp], 1e-12), 0.0)
        m_s = (ws * arr.step[sp]).sum(axis=1)
        m_s2 = (ws * arr.step_sq[sp]).sum(axis=1)
        resid[c] = np.where(m_s > 0, m_s2 / (2 * np.maximum(m_s, 1e-300)), steps[c] / 2)
        held[c] = 1.0 - np.exp(-conc[rows, k])
        # service variability c_s^2 of the residence, mixed over the types served
        m1 = (w * arr.residence[np.maximum(pk, 0)]).sum(axis=1)
        m2 = (w * arr.residence2[np.maximum(pk, 0)]).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            mean2 = np.maximum(m1, 1e-300) ** 2
            cs2 = np.where(m1 > 0, m2 * np.maximum(w.sum(axis=1), 1e-12) / mean2 - 1, 1.0)
            waits[c] = np.where(lam_c > 0, queue / np.maximum(lam_c, 1e-300), 0.0) * (ca2 + cs2) / 2
    return levels, betas, steps, held, waits, full, resid, p_full


def kv_slots(held: np.ndarray, kv_ctx: np.ndarray, batch: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """Requests an LLM executor holds at its limit ``[C]`` for the mix it holds: the max batch,
    or the KV cache over the held requests' mean context, whichever is smaller.

    ``held[C, T]``: requests of each type held (arrivals x residence at full occupancy, Little's
    law); ``kv_ctx[C, T]``: requests of the type alone the cache holds at their mean context
    (prompt + half the output: a decoding sequence is on average half way), so the mix fits
    ``1 / sum_t (h_t / kv_ctx_t)`` with ``h`` the held shares. The simulator, like vLLM, admits
    by the tokens a prompt needs now and preempts when decodes outgrow the cache, so the mean
    context, not the peak, is what a held request occupies (an approximation, labelled; the
    parts keep each type's own peak-bound batch). Rows holding nothing keep ``plain``."""
    tot = held.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = (held / kv_ctx).sum(axis=1) / np.maximum(tot, 1e-300)
        fit = np.where(inv > 0, 1.0 / np.maximum(inv, 1e-300), np.inf)
    return np.where(tot > 0, np.maximum(1.0, np.minimum(batch.astype(float), fit)), plain)


def arrival_cv2(table: CostTable) -> float:
    """Squared CV of inter-arrival times, taken for every executor (an assumption: a node's
    arrivals are a thinned, delayed copy of the workload's): the workload's gamma or Weibull
    ``cv``, else 1 (Poisson, piecewise windows, traces)."""
    wl = table.problem.workload
    cv = getattr(wl.spec.arrival, "cv", None) if wl is not None else None
    return float(cv) ** 2 if isinstance(cv, int | float) else 1.0


CHAIN_MAX = 1024  # states of the occupancy chain below the batch limit (larger batches: the limit)
CHAIN_FLOOR = 0.05  # below this load of the batch limit at full occupancy the admission queue is taken as 0


def admission_queue(conc: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """Mean requests waiting for admission ``[C]`` (:func:`admission_chain`)."""
    return admission_chain(conc, slots)[0]


def admission_chain(conc: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean requests waiting for admission ``[C]`` of an executor component, from a birth-death
    chain of the requests it holds (an approximation: exponential arrivals and departures, the
    stationary law of an M/M/c queue whose service rate depends on the occupancy).

    With ``n`` requests held, ``min(n, B)`` are in service (``B = slots``, the batch limit) and
    each leaves at rate ``1 / residence(n)``, interpolated linearly between the occupancy levels
    around ``n`` (``conc[:, l] = lambda residence`` at level ``l``, room ``max(1, B FILLS[l])``),
    so ``p(n) / p(n - 1) = lambda residence(n) / min(n, B)``. A component whose step hardly grows
    with the batch behaves like ``M/M/inf``, one whose step grows in proportion like processor
    sharing; above ``B`` the queue is geometric with ratio ``conc_full / B``, and at or above 1
    the component is overloaded (infinite queue). Rows whose ratio is below ``CHAIN_FLOOR``
    are taken as 0 (their tail above ``B`` is negligible).

    Also ``P(N >= B)`` ``[C]``, the stationary probability that every slot is taken, which is
    the probability that a Poisson arrival waits (PASTA; 1 when overloaded, 0 where the queue
    is taken as 0)."""
    n_c = len(conc)
    out = np.zeros(n_c)
    full = np.zeros(n_c)
    b_all = np.clip(np.floor(slots), 1, CHAIN_MAX).astype(int)
    r_all = conc[:, -1] / b_all  # queue ratio above B
    out[r_all >= 1.0] = np.inf
    full[r_all >= 1.0] = 1.0
    sel = np.flatnonzero((r_all >= CHAIN_FLOOR) & (r_all < 1.0))
    if not len(sel):
        return out, full
    conc, b, r = conc[sel], b_all[sel], r_all[sel]
    m = len(sel)
    n = np.arange(1, int(b.max()) + 1)  # [N]
    frac = n[None, :] / np.maximum(slots[sel], 1.0)[:, None]  # [m, N]
    hi = np.where(n[None, :] <= 1, 0, np.searchsorted(FILLS, frac, side="left"))
    hi = np.minimum(hi, len(FILLS) - 1)
    lo = np.maximum(hi - 1, 0)
    room = np.maximum(1.0, slots[sel][:, None] * FILLS[None, :])
    r_hi, r_lo = np.take_along_axis(room, hi, axis=1), np.take_along_axis(room, lo, axis=1)
    f = np.clip((n[None, :] - r_lo) / np.maximum(r_hi - r_lo, 1e-12), 0.0, 1.0)
    x = (1 - f) * np.take_along_axis(conc, lo, axis=1) + f * np.take_along_axis(conc, hi, axis=1)
    inside = n[None, :] <= b[:, None]
    logr = np.where(inside, np.log(np.maximum(x, 1e-300)) - np.log(n[None, :]), 0.0)
    logp = np.concatenate([np.zeros((m, 1)), np.cumsum(logr, axis=1)], axis=1)  # n = 0..N
    logp = np.where(np.concatenate([np.ones((m, 1), bool), inside], axis=1), logp, -np.inf)
    p = np.exp(logp - logp.max(axis=1, keepdims=True))
    p_b = p[np.arange(m), b]
    z = p.sum(axis=1) + p_b * r / (1.0 - r)  # with the mass above B
    out[sel] = p_b * r / (1.0 - r) ** 2 / z  # E[(N - B)^+]
    full[sel] = p_b / (1.0 - r) / z  # P(N >= B): the geometric mass from B up
    return out, full


def route_latency(table: CostTable, cands: Candidates, state: State, t: int, route: tuple[int, ...],
                  transfer_s: float, cache: dict[tuple[int, str], Service] | None = None,
                  samples: int | None = None) -> np.ndarray:
    """First-response latency ``[C, K]`` of type ``t``'s samples along one route (``cache``:
    the services of this type's components by node, shared by its routes)."""
    path, where, service = route_services(table, cands, state, t, route, cache, samples)
    return path_latency(table.model, table.types[t], path, where, service, transfer_s)


def route_services(table: CostTable, cands: Candidates, state: State, t: int, route: tuple[int, ...],
                   cache: dict[tuple[int, str], Service] | None = None, samples: int | None = None
                   ) -> tuple[list[str], dict[str, int], Callable[[str], Service]]:
    """Type ``t``'s path, the node instance serving each of its components along ``route``,
    and each component's :class:`Service` there (memoised in ``cache``)."""
    arr = table.arrays()
    tname = table.types[t]
    path = table.paths[tname]
    where = {c: n for n in route for c in cands.lp.nodes[n] if c in path}
    rows = np.arange(len(cands))
    memo = {} if cache is None else cache

    def service(c: str) -> Service:
        n = where[c]
        hit = memo.get((n, c))
        if hit is not None:
            return hit
        level, wait, turns, law = state[(n, c)]
        pid = cands.costs[n].part[c][cands.opt[:, n], t, :][rows, level]  # [C]
        packed = arr.packed if samples is None else arr.screen(samples)
        block = packed[pid]  # [C, 5, K]: cpu, first, done, steps_first - 1, steps_done - 1
        gap = turns[:, None].astype(np.float32)
        if law is None:
            waits = wait[:, None].astype(np.float32)
        else:  # common random numbers: by type, component and sample index (a prefix for screens)
            draws = wait_draws(tname, c, arr.packed.shape[-1])[:, :packed.shape[-1]]
            waits = law.sample(draws).astype(np.float32)
        sv = Service(block[:, 0], waits, block[:, 1] + block[:, 3] * gap, block[:, 2] + block[:, 4] * gap)
        memo[(n, c)] = sv
        return sv

    return path, where, service


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
    first, done = path_times(model, path, where, service, transfer_s)
    sink = path[-1]
    metric = model.request_type(type_name).first_response
    return done[sink] if metric is FirstResponse.E2E else first[sink]


def path_times(model: ModelSpec, path: list[str], where: Mapping[str, int], service: Callable[[str], Service],
               transfer_s: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per component on the path: the time from arrival of its first output and of its
    completion (:func:`path_latency`'s composition)."""
    first: dict[str, np.ndarray] = {}
    done: dict[str, np.ndarray] = {}
    enc_free: dict[int, np.ndarray] = {}
    for c in path:
        n = where[c]
        sv = service(c)
        start: np.ndarray = np.zeros(1)
        for pred, streaming in model.feeders(path, c):
            rel = first[pred] if streaming else done[pred]
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
    return first, done
