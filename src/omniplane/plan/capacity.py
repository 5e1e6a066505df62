"""Capacity planning: the fewest GPUs of one kind whose best plan meets every request type's
attainment at an offered rate ``R`` in the simulator (docs/guides/plan.md, "Capacity").

* **Evaluation at R.** Each probed count ``N`` is planned with the planner evaluating every plan
  at ``R`` (:class:`~omniplane.plan.pipeline.Planner` with ``rate=R``: plans whose flow bound
  ``R_d`` is below ``R`` are not built, the others are estimated and simulated at ``R``, no
  ``alpha`` headroom). The pick at ``N`` is the simulated plan with the highest smallest
  attainment over the active types (ties: total goodput); ``N`` meets when that attainment is at
  least the target for every type.
* **Lower bound (flow relaxation).** Every plan serving ``R`` needs at least
  ``R x sum_t pi_t W_t`` GPUs, ``W_t`` the fewest GPU-seconds one type-``t`` request costs on any
  executor config along any route of the searched space at full batch (the flow bound's
  continuous relaxation, :mod:`omniplane.plan.bounds`), and at least the fewest GPUs of any
  logical plan of that space covering every type. No count below it is probed.
* **Upper bound by doubling.** From the lower bound the step doubles (``lo + s``, ``lo + 3s``,
  ``lo + 7s``, ... with ``s = ceil(lo / 8)``) until a count meets; then bisection between the
  largest count that missed and the GPUs the meeting plan uses. Meeting is monotone in ``N`` (a
  plan that fits ``N`` GPUs fits ``N + 1``) but each probe's search is budgeted
  (``mc_budget``), so a probe also considers every plan found at a smaller count (same sample,
  same rate), and a plan that met at any count answers for every count it fits. The probes
  are listed in the output.
* **Minimality evidence.** The best plan at ``N - 1`` simulated at ``R`` and the type that
  misses most; when ``N - 1`` is below the flow bound, the planner's ordinary pick at ``N - 1``
  (at ``alpha x R_d``) simulated at ``R``.
* **Headroom.** The highest rate at which the chosen plan still meets, on the same request
  sample: the rate grows by ``HEADROOM_GROWTH`` until it misses (at most ``HEADROOM_GROWS``
  times), then ``HEADROOM_BISECT`` bisection steps; never above the plan's flow bound
  (:func:`flow_rate`: each executor at full batch, its highest throughput). Above it the sample
  can still meet for as long as it lasts (``N / rate`` seconds of arrivals): an LLM stage admits
  the excess into its batch until the batch is full, and the first responses the targets measure
  stay fast while the streams slow down (Qwen3-Omni's talker: max batch 128, 537 frames/s per
  executor at any batch; tests/plan/test_flow_saturation.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from omniplane.plan.bounds import node_floor, subplan_agg
from omniplane.plan.order import LogicalOrder
from omniplane.plan.pipeline import Planner, PlanResult
from omniplane.plan.pool import Simulated
from omniplane.plan.refine import SimOutcome
from omniplane.plan.space import FULL, Space
from omniplane.spec import PlanSpec

HEADROOM_GROWTH = 1.25  # rate factor per growth step (assumption: a coarse first bracket)
HEADROOM_GROWS = 4  # growth steps at most: headroom is reported up to 1.25^4 = 2.44 x R
HEADROOM_BISECT = 5  # bisection steps inside the bracket (resolution 1/32 of it)
MAX_DOUBLINGS = 8  # upper-bound steps from the lower bound before giving up
MAX_GPUS = 256  # the largest count probed (assumption: bounds the time, not a limit of the method)


@dataclass
class Probe:
    """One GPU count tried: the pick at ``R`` and its per-type attainment (empty: no plan)."""

    gpus: int
    meets: bool
    attainment: dict[str, float]
    why: str  # "simulated" or the bound that excluded every plan
    seconds: float = 0.0
    pick: Simulated | None = None

    def worst(self) -> str | None:
        """The type furthest below (or closest to) its target."""
        return min(self.attainment, key=lambda t: self.attainment[t]) if self.attainment else None

    def to_json(self) -> dict[str, object]:
        return {"gpus": self.gpus, "meets": self.meets, "why": self.why, "seconds": round(self.seconds, 2),
                "attainment": {t: round(a, 4) for t, a in self.attainment.items()},
                "worst_type": self.worst()}


@dataclass
class Capacity:
    """The answer for one GPU kind at one rate."""

    rate: float
    gpu: str
    target: float  # attainment asked of every type
    lower: int  # the flow relaxation's lower bound
    probes: list[Probe]
    gpus: int | None = None  # None: no count up to the last probe meets
    plan: PlanSpec | None = None
    attainment: dict[str, float] = field(default_factory=dict)
    gpu_seconds: dict[str, float] = field(default_factory=dict)  # per request of each type (cost model)
    one_fewer: Probe | None = None
    headroom_rps: float | None = None
    headroom_note: str = ""
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time (the wall time includes other processes' load)

    @property
    def gpus_used(self) -> int | None:
        return self.plan.total_gpus if self.plan is not None else None


def min_attainment(out: SimOutcome, active: list[int]) -> float:
    return float(min(out.attainment[k] for k in active)) if active else 1.0


class CapacityPlanner:
    """Finds the smallest count for one problem (one model, workload and GPU kind); ``base`` is
    a planner of that problem (any budget) whose profile, targets and options every probe reuses;
    ``space`` the plan space every probe and the lower bound search (a runtime's, or the ideal
    ``FULL``) -- give ``base`` that runtime's cost table too (omniplane.plan.runtime.setup)."""

    def __init__(self, base: Planner, rate: float, target: float,
                 progress: Callable[[str], None] = lambda _: None, space: Space = FULL) -> None:
        if not rate > 0:
            raise ValueError(f"the offered rate must be > 0 req/s, got {rate}")
        if not 0 < target <= 1:
            raise ValueError(f"the attainment target must be in (0, 1], got {target}")
        self.base, self.rate, self.target, self.say, self.space = base, rate, target, progress, space
        pb = base.problem
        self.types = pb.types
        self.active = [k for k, t in enumerate(pb.types) if pb.mix.get(t, 0.0) > 0]
        self.sim = base.simulator  # one request sample for every probe (common random numbers)
        self._probes: dict[int, Probe] = {}

    # ---- the bounds -------------------------------------------------------------------------------
    def lower_bound(self) -> int:
        """See the module docstring: ``max(ceil(R sum_t pi_t W_t), fewest GPUs of any plan)``."""
        pb, opt = self.base.problem, self.base.options
        pi = pb.pi()
        if self.space.logical is not None:  # a fixed space (a runtime's): its own subplans
            found = self._fixed_sides(pi)
            if found is None:
                return 1
            cost, least = found
        else:
            order = LogicalOrder(self.base.table, self.space, pi, 1, opt.k_c, opt.k_s, opt.grid_steps)
            if not order.aggs:
                return 1
            cost = order.sides.cost  # [P, T] GPU-seconds per request, each type on its cheapest route
            least = float(order.sides.mins.min())
        w = np.where(np.isfinite(cost), cost, np.inf).min(axis=0)
        per_request = float(np.sum(np.where(pi > 0, pi * w, 0.0)))
        if not math.isfinite(per_request) or not math.isfinite(least):
            return 1
        return max(1, math.ceil(self.rate * per_request - 1e-9), math.ceil(least - 1e-9))

    def _fixed_sides(self, pi: np.ndarray) -> tuple[np.ndarray, float] | None:
        """``(cost[P, T], fewest GPUs of any logical plan)`` over a fixed space's subplans."""
        table, space = self.base.table, self.space
        assert space.logical is not None
        subs = list(dict.fromkeys(sp for lp in space.logical for sp in lp.subplans))
        if not subs:
            return None

        def floor(node: frozenset[str]) -> tuple[float, np.ndarray]:
            nc = table.node(node)
            tps = space.tp.get(node)
            allowed = np.array([k for k, (tp, _) in enumerate(nc.options) if tps is None or tp in tps],
                               dtype=int)
            return node_floor(nc, allowed)

        aggs = {sp: subplan_agg(sp, [floor(n) for n in sp.nodes], pi, 1) for sp in subs}
        cost = np.stack([aggs[sp].route_cost for sp in subs])
        least = min(sum(aggs[sp].min_gpus for sp in lp.subplans) for lp in space.logical)
        return cost, float(least)

    # ---- probes ------------------------------------------------------------------------------------
    def _planner(self, n: int, rate: float | None) -> Planner:
        b = self.base
        p = Planner(b.problem.with_budget(n), options=b.options, cost=b.cost, table=b.table,
                    targets=b.targets, policy="balanced" if rate is not None else b.policy_name,
                    transfer_s=b.transfer_s, gpus=b.gpus, rate=rate)
        p._sim = self.sim if rate is not None else None
        return p

    def _pick(self, planner: Planner, res: PlanResult) -> Simulated | None:
        """The simulated plan with the highest smallest attainment (ties: total goodput)."""
        if not res.simulated:
            return None

        def key(s: Simulated) -> tuple[float, ...]:
            low = min_attainment(s.outcome, self.active)
            meets = low >= self.target  # among plans that meet: the fewest GPUs first
            return (float(meets), -float(s.plan.total_gpus) if meets else 0.0, low,
                    float(s.outcome.goodput.sum()))

        return planner.finish(max(res.simulated, key=key), res.simulated)

    def probe(self, n: int) -> Probe:
        """The pick at ``n`` GPUs. A plan that met at another budget and fits ``n`` GPUs answers
        for ``n`` too (also over a search at ``n`` that missed: the search is budgeted)."""
        known = [p for p in self._probes.values()
                 if p.meets and p.pick is not None and p.pick.plan.total_gpus <= n]
        hit = self._probes.get(n)
        if hit is not None and (hit.meets or not known):
            return hit
        if known:  # a plan found at another budget that meets and fits this one
            p = min(known, key=lambda p: p.pick.plan.total_gpus if p.pick is not None else n)
            why = f"the plan found at {p.gpus} GPUs fits"
            self._probes[n] = Probe(n, True, p.attainment, why, 0.0, p.pick)
            return self._probes[n]
        t0 = time.perf_counter()
        planner = self._planner(n, self.rate)
        res = planner.run(self.space)
        # every plan simulated at a smaller budget fits this one, on the same sample and rate:
        # the pick is the best of all of them (the search's own, budgeted, need not be monotone in n)
        seen = {id(s) for s in res.simulated}
        res.simulated.extend(p.pick for p in self._probes.values()
                             if p.gpus < n and p.pick is not None and id(p.pick) not in seen)
        pick = self._pick(planner, res)
        if pick is None:
            pr = Probe(n, False, {}, f"flow bound: no plan on {n} GPUs reaches {self.rate:g} req/s",
                       time.perf_counter() - t0)
        else:
            att = self._attainment(pick.outcome)
            pr = Probe(n, min(att.values(), default=1.0) >= self.target, att, "simulated",
                       time.perf_counter() - t0, pick)
        self.say(f"{n} GPUs: " + ("meets" if pr.meets else "misses") +
                 (f" (worst {pr.worst()} {pr.attainment[pr.worst() or '']:.2f})" if pr.attainment else
                  f" ({pr.why})"))
        self._probes[n] = pr
        return pr

    def _attainment(self, out: SimOutcome) -> dict[str, float]:
        return {self.types[k]: float(out.attainment[k]) for k in self.active}

    def _fallback(self, n: int) -> Probe:
        """The planner's ordinary pick at ``n`` (alpha x R_d) simulated at ``R``: the evidence
        when no plan on ``n`` GPUs has a flow bound reaching ``R``."""
        t0 = time.perf_counter()
        res = self._planner(n, None).run(self.space)
        if res.best is None:
            return Probe(n, False, {}, f"no plan fits {n} GPUs", time.perf_counter() - t0)
        out = self.sim.run(res.best.plan, self.rate)
        att = self._attainment(out)
        return Probe(n, min(att.values(), default=1.0) >= self.target, att,
                     f"flow bound below {self.rate:g} req/s: the planner's pick at alpha x R_d, "
                     "simulated at the rate",
                     time.perf_counter() - t0, res.best)

    # ---- the search --------------------------------------------------------------------------------
    def run(self, max_gpus: int = MAX_GPUS, headroom: bool = True) -> Capacity:
        t0, c0 = time.perf_counter(), time.process_time()
        lo = self.lower_bound()
        cap = Capacity(self.rate, self.base.problem.gpu.name, self.target, lo, [])
        hi = self._first_meeting(lo, max_gpus)
        if hi is None:
            cap.probes = sorted(self._probes.values(), key=lambda p: p.gpus)
            cap.seconds, cap.cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
            return cap
        while True:
            # the largest count below ``hi`` known to miss (the lower bound's count less one
            # misses by the flow relaxation)
            miss = max([p.gpus for p in self._probes.values() if not p.meets and p.gpus < hi],
                       default=lo - 1)
            if hi - miss <= 1:
                break
            mid = (miss + hi) // 2
            if self.probe(mid).meets:
                hi = self._used(mid)
        win = self.probe(hi)
        assert win.pick is not None
        # the budget the plan file states is the answer (the plan may have been found at a larger one)
        cap.gpus, cap.plan, cap.attainment = hi, win.pick.plan.model_copy(update={"gpus": hi}), win.attainment
        cap.gpu_seconds = gpu_seconds(win.pick, self.types)
        if hi > 1:
            prev = self._probes.get(hi - 1) or self.probe(hi - 1)
            cap.one_fewer = prev if prev.pick is not None else self._fallback(hi - 1)
        if headroom:
            flow = flow_rate(win.pick, self.base.problem.pi())
            cap.headroom_rps, cap.headroom_note = self.headroom(win.pick.plan, flow)
        # a count whose own search missed but that a plan found later fits meets
        cap.probes = [self.probe(n) for n in sorted(self._probes)]
        cap.seconds, cap.cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        return cap

    def _used(self, n: int) -> int:
        """GPUs the pick at ``n`` uses (a meeting plan may leave some of the budget idle)."""
        pick = self.probe(n).pick
        return min(n, pick.plan.total_gpus) if pick is not None else n

    def _first_meeting(self, lo: int, max_gpus: int) -> int | None:
        """A count that meets: ``lo``, then ``lo + s``, ``lo + 3s``, ... (the step doubles)."""
        if self.probe(lo).meets:
            return self._used(lo)
        n, step = lo, max(1, math.ceil(lo / 8))
        for _ in range(MAX_DOUBLINGS):
            if n >= max_gpus:
                return None
            n = min(n + step, max_gpus)
            if self.probe(n).meets:
                return self._used(n)
            step *= 2
        return None

    def meets_at(self, spec: PlanSpec, rate: float) -> bool:
        return min_attainment(self.sim.run(spec, rate), self.active) >= self.target

    def headroom(self, spec: PlanSpec, flow: float = math.inf) -> tuple[float, str]:
        """The highest rate (simulated, same sample) at which ``spec`` still meets, at most its
        flow bound ``flow`` (module docstring)."""
        ok, bad = self.rate, None
        for _ in range(HEADROOM_GROWS):
            r = ok * HEADROOM_GROWTH
            if r > flow:
                if flow <= ok or self.meets_at(spec, flow):
                    return max(ok, flow), (f"meets up to its flow bound, {max(ok, flow):.3g} req/s (above it "
                                           "the sample meets only while the batches absorb the excess)")
                bad = flow
                break
            if self.meets_at(spec, r):
                ok = r
            else:
                bad = r
                break
        if bad is None:
            return ok, f"meets up to at least {ok:.3g} req/s (the last rate tried)"
        for _ in range(HEADROOM_BISECT):
            mid = (ok + bad) / 2
            if self.meets_at(spec, mid):
                ok = mid
            else:
                bad = mid
        return ok, f"meets at {ok:.3g} req/s, misses at {bad:.3g} req/s"


def flow_rate(s: Simulated, pi: np.ndarray) -> float:
    """The plan's flow bound ``min_n x_n / l_n`` (requests/s; omniplane.plan.flow), not clipped to
    the rate the planner evaluated it at."""
    c, i = s.block.cands, s.i
    share = c.share[int(c.vec[i])]  # [m, T]
    out = math.inf
    for n, nc in enumerate(c.costs):
        load = float(share[n] @ (pi * nc.s_full[int(c.opt[i, n])]))
        if load > 0:
            out = min(out, float(c.cnt[i, n]) / load)
    return out


def gpu_seconds(s: Simulated, types: list[str]) -> dict[str, float]:
    """GPU-seconds one request of each type costs in the plan at full batch (cost model):
    ``sum_n share[n, t] s_full[n, t] tp_n`` over the plan's nodes."""
    c, i = s.block.cands, s.i
    share = c.share[int(c.vec[i])]  # [m, T]
    out = np.zeros(len(types))
    for n, nc in enumerate(c.costs):
        o = int(c.opt[i, n])
        out += share[n] * nc.s_full[o] * float(nc.tp[o])
    return {t: float(out[k]) for k, t in enumerate(types)}


def planner_for(base: Planner, **options: object) -> Planner:
    """``base`` with some options replaced (``mc_budget`` etc.), sharing its profile and targets."""
    return Planner(base.problem, options=replace(base.options, **options), cost=base.cost,  # type: ignore[arg-type]
                   table=base.table, targets=base.targets, policy=base.policy_name,
                   transfer_s=base.transfer_s, gpus=base.gpus)
