"""An admissible upper bound on the Monte Carlo estimate of physical plans, cheaper than the
estimate itself, so that the search runs the Monte Carlo phase only on plans that can still
beat the best estimate (branch and bound on the estimate; docs/guides/plan.md, "Search").

The Monte Carlo phase (:mod:`omniplane.plan.montecarlo`) gives type ``t`` the goodput
``alpha R_d pi_t sum_r p_{t,r} A_{t,r}`` with ``A_{t,r}`` the share of the type's samples whose
first-response latency along route ``r`` is within the target. Each sample's latency there is
composed (maxima and sums) of non-negative terms that only grow with load:

* a component's service at the occupancy level the phase picks: that level is at least the
  level ``k0`` picked with no turns of other hosted components (its first fixed-point pass:
  turns only lengthen residence, so the Little's-law occupancy only rises), hence the service
  is at least the minimum over levels ``>= k0`` of the part's per-sample times;
* the wait for the step in progress and the turns of other components (>= 0: dropped here);
* an encoder's ``max(cpu, wait) >= cpu``.

Composing the lower bounds the same way gives a per-sample lower bound on latency, so the
share within the target is an upper bound on ``A_{t,r}``, and ``alpha R_d pi_t sum_r
p_{t,r} A^ub_{t,r}`` an upper bound on type ``t``'s estimated goodput. ``A^ub`` depends only on the
type, the route's node component sets, their configs and the levels ``k0``: discrete, so it is
memoised across candidates and logical plans (one table for the whole search).

Per type this is ``alpha R_d pi_t sum_r p_{t,r} A^ub_{t,r}``; both selection policies are
non-decreasing in every type's goodput, so their score of the bound bounds the estimate's.
"""

from __future__ import annotations

import numpy as np

from omniplane.plan.costs import FILLS, CostTable
from omniplane.plan.flow import Candidates
from omniplane.plan.montecarlo import Service, occupancy, path_latency

SLACK = 1e-6  # relative: samples this close above the target count as within it (float32 rounding)


class EstimateBound:
    """Upper bounds on Monte Carlo total goodput (see the module docstring), memoised."""

    def __init__(self, table: CostTable, pi: np.ndarray, slo_s: np.ndarray, alpha: float,
                 transfer_s: float) -> None:
        self.table, self.pi, self.slo, self.alpha, self.transfer = table, pi, slo_s, alpha, transfer_s
        self._memo: dict[tuple[object, ...], dict[int, float]] = {}
        self.evaluated = 0  # distinct (type, route, configs, levels) keys whose bound was computed

    def goodput(self, cands: Candidates, loaded: bool = True) -> np.ndarray:
        """``[C, T]`` upper bound on each candidate's estimated goodput per type (any score
        that does not decrease in any type's goodput is bounded by its score). ``loaded``
        False: every level ``k0`` taken as 0, a bound for every count vector of a row
        (config and routing vector) whose ``R_d`` is at most ``cands.rate``."""
        n_c = len(cands)
        out = np.zeros((n_c, len(self.pi)))
        if n_c == 0:
            return out
        if loaded:
            levels = self._levels(cands)
        else:
            zero = np.zeros(n_c, dtype=np.int64)
            levels = {(n, c): zero for n, nc in enumerate(cands.costs) for c in nc.comps}
        rate = self.alpha * cands.rate
        for t, routes in enumerate(cands.lp.routes):
            if self.pi[t] <= 0:
                continue
            probs = cands.p[cands.vec, t, :]
            for r, route in enumerate(routes):
                out[:, t] += probs[:, r] * self._attain(cands, levels, t, route)
            out[:, t] *= rate * self.pi[t]
        return out

    def _levels(self, cands: Candidates) -> dict[tuple[int, str], np.ndarray]:
        """``k0`` per (node instance, component): the occupancy level with no turns."""
        arr = self.table.arrays()
        pi = self.pi
        lam = (self.alpha * cands.rate)[:, None, None] * cands.share[cands.vec] * pi[None, None, :] \
            / cands.cnt[:, :, None]
        rows = np.arange(len(cands))
        out: dict[tuple[int, str], np.ndarray] = {}
        for n, nc in enumerate(cands.costs):
            zero = {c: np.zeros(len(cands)) for c in nc.comps}
            # the level is Little's law alone: no admission queue (it only adds waits, which the
            # bound drops), so the arrival CV does not enter
            levels = occupancy(nc, cands.opt[:, n], lam[:, n, :], arr, rows, zero, 1.0, False)[0]
            for c in nc.comps:
                out[(n, c)] = levels[c]
        return out

    def _attain(self, cands: Candidates, levels: dict[tuple[int, str], np.ndarray], t: int,
                route: tuple[int, ...]) -> np.ndarray:
        tname = self.table.types[t]
        path = self.table.paths[tname]
        lp = cands.lp
        where = {c: n for n in route for c in lp.nodes[n] if c in path}
        comps = [c for c in path if c in where]
        # integer code of (config of each route node, level of each path component)
        n_opt = [len(cands.costs[n].options) for n in route]
        code = np.zeros(len(cands), dtype=np.int64)
        for n, size in zip(route, n_opt, strict=True):
            code = code * size + cands.opt[:, n]
        for c in comps:
            code = code * len(FILLS) + levels[(where[c], c)]
        key = (t, tuple(lp.nodes[n] for n in route))
        memo = self._memo.setdefault(key, {})
        uniq, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        missing = [i for i, u in enumerate(uniq.tolist()) if u not in memo]
        if missing:
            vals = self._compute(cands, levels, t, where, first[missing])
            for i, v in zip(missing, vals.tolist(), strict=True):
                memo[int(uniq[i])] = v
            self.evaluated += len(missing)
        table = np.array([memo[int(u)] for u in uniq.tolist()])
        return np.asarray(table[inverse])

    def _compute(self, cands: Candidates, levels: dict[tuple[int, str], np.ndarray], t: int,
                 where: dict[str, int], idx: np.ndarray) -> np.ndarray:
        """The bound on ``A_{t,r}`` of candidates ``idx`` (one per key)."""
        arr = self.table.arrays()
        tname = self.table.types[t]
        path = self.table.paths[tname]
        packed = arr.packed
        n_l = len(FILLS)
        cache: dict[str, Service] = {}

        def service(c: str) -> Service:
            hit = cache.get(c)
            if hit is not None:
                return hit
            n = where[c]
            pids = cands.costs[n].part[c][cands.opt[idx, n], t, :]  # [I, L]
            k0 = levels[(n, c)][idx]
            block = packed[np.maximum(pids, 0)]  # [I, L, 5, K]
            above = (np.arange(n_l)[None, :] >= k0[:, None]) & (pids >= 0)  # [I, L]
            big = np.float32(np.inf)
            first = np.where(above[:, :, None], block[:, :, 1], big).min(axis=1)
            done = np.where(above[:, :, None], block[:, :, 2], big).min(axis=1)
            cpu = np.where(above[:, :, None], block[:, :, 0], big).min(axis=1)
            sv = Service(cpu, np.zeros((1, 1), dtype=np.float32), first, done)
            cache[c] = sv
            return sv

        lat = path_latency(self.table.model, tname, path, where, service, self.transfer)
        return np.asarray((lat <= self.slo[t] * (1 + SLACK)).mean(axis=1))
