"""Request-level simulation of plans (Algorithm 2, the third phase) with ``omniplane.sim``.

Every plan runs the same request sequence (common random numbers): one sample of the workload
drawn at 1 request/s, its arrival times divided by the plan's rate. The rate is ``alpha x R_d``
for planner candidates; :func:`max_goodput` sweeps it to find the highest goodput a plan
reaches (the paper's comparison metric, section 6.1).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from omniplane.perf import CostModel
from omniplane.sim import RunSetup, simulate
from omniplane.sim.costs import PriceBook
from omniplane.spec import GPUCatalog, ModelSpec, PlanSpec, ResolvedWorkload, resolve_plan
from omniplane.spec.work import ResolvedWork
from omniplane.workload import Request, generate


@dataclass(frozen=True)
class SimOutcome:
    rate: float  # offered requests/s
    goodput: np.ndarray  # [T] requests/s meeting the target
    attainment: np.ndarray  # [T]
    p50_ms: np.ndarray  # [T] first-response p50
    wall_s: float
    window_s: float = 0.0  # arrival window the goodput is measured over
    latencies: tuple[np.ndarray, ...] = ()  # per type: first-response latency (s), inf if none

    def goodput_at(self, t: int, target_s: float) -> float:
        """Type ``t``'s goodput had its target been ``target_s`` (same run)."""
        lat = self.latencies[t]
        return float((lat <= target_s).sum() / self.window_s) if self.window_s > 0 else 0.0


class SampleRunner:
    """Runs plans on one fixed request sample (common random numbers across plans)."""

    def __init__(self, workload: ResolvedWorkload, mix: Mapping[str, float], n: int, seed: int,
                 cost: CostModel, gpus: GPUCatalog, targets_s: Mapping[str, float]) -> None:
        self.model = workload.model
        self.types = self.model.type_names
        use = {t: f for t, f in mix.items() if f > 0}
        self.base: list[Request] = generate(workload, n=n, rate=1.0, seed=seed, mix=use)
        self.cost = cost
        self.prices = PriceBook(cost)  # step prices kept across the plans and rates simulated
        self.gpus = gpus
        self.targets = dict(targets_s)
        self.seed = seed
        self.runs = 0
        self.requests = 0

    def derived(self, model: ModelSpec, work: Callable[[ResolvedWork], ResolvedWork],
                cost: CostModel) -> SampleRunner:
        """The same request sample, each request's work transformed, on a derived model (the
        same request types) priced by ``cost``: a baseline that splits a component
        (prefill/decode, plan.disagg)."""
        other = copy.copy(self)
        other.model, other.cost, other.prices = model, cost, PriceBook(cost)
        other.base = [Request(r.id, r.arrival, r.type, work(r.work), r.meta) for r in self.base]
        return other

    def arrival_factor(self) -> dict[str, float]:
        """Per type: requests of the sample per unit of offered rate over its arrival window
        (``arrived_t / window`` at rate 1): a plan's simulated goodput of type ``t`` at rate
        ``R`` is at most ``R`` times this (metrics count requests arrived in the window)."""
        if len(self.base) < 2:
            return dict.fromkeys(self.types, 1.0)
        arrivals = [r.arrival for r in self.base]
        span = max(arrivals) - min(arrivals)
        out = dict.fromkeys(self.types, 0.0)
        for r in self.base:
            out[r.type] += 1.0 / span
        return out

    def at_rate(self, rate: float) -> list[Request]:
        return [Request(r.id, r.arrival / rate, r.type, r.work, r.meta) for r in self.base]

    def run(self, spec: PlanSpec, rate: float) -> SimOutcome:
        plan = resolve_plan(spec, self.model, self.gpus)
        res = simulate(plan, self.at_rate(rate), self.cost, slo_s=self.targets, seed=self.seed,
                       setup=RunSetup(prices=self.prices))
        self.runs += 1
        self.requests += len(self.base)
        good = np.zeros(len(self.types))
        att = np.zeros(len(self.types))
        p50 = np.full(len(self.types), np.nan)
        for i, t in enumerate(self.types):
            m = res.per_type.get(t)
            if m is None:
                continue
            good[i] = m.goodput
            att[i] = m.attainment or 0.0
            p50[i] = m.latency_ms.get("p50") or np.nan
        rec = res.requests
        lat = np.where(np.isnan(rec.first_response), np.inf, rec.latency())
        return SimOutcome(rate, good, att, p50, res.wall_s, res.window_s,
                          tuple(lat[rec.type == t] for t in self.types))


def max_goodput(sim: SampleRunner, spec: PlanSpec, rate: float,
                scales: Sequence[float] = (0.5, 0.7, 0.85, 1.0, 1.15)) -> tuple[SimOutcome, list[SimOutcome]]:
    """The best total goodput over offered rates ``rate x scales`` (and every run)."""
    runs = [sim.run(spec, rate * s) for s in scales]
    best = max(runs, key=lambda o: float(o.goodput.sum()))
    return best, runs
