"""The planner: profile -> enumerate -> flow -> Monte Carlo -> simulate -> select.

``Planner(problem).run()`` is the whole of Cornfigurator's Algorithms 1 and 2 over a plan space
(the full space, or a baseline's restriction). The profile (:class:`CostTable`) and the latency
targets are built once per planner and reused by :meth:`Planner.replan` for a new GPU budget
or type mix (section 4.4).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from omniplane import __version__
from omniplane.perf import CostModel
from omniplane.plan.costs import CostTable
from omniplane.plan.emit import to_spec
from omniplane.plan.options import PlannerOptions
from omniplane.plan.problem import Problem
from omniplane.plan.progress import NO_PROGRESS, Progress
from omniplane.plan.refine import SampleRunner, SimOutcome
from omniplane.plan.search import Block, Cloud, Search, SearchStats
from omniplane.plan.select import pareto_front, selection_policy
from omniplane.plan.slo import DEFAULT_TRANSFER_S, resolve_targets, target_array
from omniplane.plan.space import FULL, Space
from omniplane.spec import (
    GPUCatalog,
    LatencyTargets,
    PlanSpec,
    PredictedGoodput,
    Prediction,
    load_gpus,
    workload_ref,
)


@dataclass(frozen=True)
class Phase:
    count: float
    seconds: float


@dataclass
class Simulated:
    """One plan run through the simulator."""

    spec: PlanSpec
    rate: float  # R_d, requests/s (flow bound)
    mc: np.ndarray  # [T] Monte Carlo goodput estimate at alpha x R_d
    sim: SimOutcome  # simulated at alpha x R_d
    logical: str


@dataclass
class PlanResult:
    space: str
    problem: Problem
    targets: LatencyTargets
    options: PlannerOptions
    best: Simulated | None
    simulated: list[Simulated]
    phases: dict[str, Phase]
    stats: SearchStats
    cloud: Cloud
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def types(self) -> list[str]:
        return self.problem.types

    def per_type(self) -> dict[str, float]:
        if self.best is None:
            return dict.fromkeys(self.types, 0.0)
        return {t: float(g) for t, g in zip(self.types, self.best.sim.goodput, strict=True)}

    @property
    def total(self) -> float:
        return float(self.best.sim.goodput.sum()) if self.best else 0.0

    def accuracy(self) -> dict[str, float | int]:
        """Flow + Monte Carlo total goodput vs the simulator's over the simulated plans."""
        errs = [abs(s.mc.sum() - s.sim.goodput.sum()) / s.sim.goodput.sum()
                for s in self.simulated if s.sim.goodput.sum() > 0]
        if not errs:
            return {"plans": 0}
        return {"plans": len(errs), "mean_abs_error": float(np.mean(errs)),
                "median_abs_error": float(np.median(errs))}


class Planner:
    """Plans one problem; see the module docstring."""

    def __init__(self, problem: Problem, *, options: PlannerOptions | None = None,
                 cost: CostModel | None = None, table: CostTable | None = None,
                 targets: LatencyTargets | None = None, slo_overrides_ms: dict[str, float] | None = None,
                 policy: str = "total", transfer_s: float = DEFAULT_TRANSFER_S,
                 gpus: GPUCatalog | None = None, progress: Progress = NO_PROGRESS) -> None:
        self.problem = problem
        self.options = options or PlannerOptions()
        self.cost = cost or (table.cost if table else CostModel(problem.model))
        self.table = table or CostTable(problem, self.cost)
        self.transfer_s = transfer_s
        self.policy_name = policy
        self.score = selection_policy(policy)
        self.gpus = gpus or load_gpus()
        self.progress = progress
        t0 = time.perf_counter()
        self.targets = targets or resolve_targets(problem.workload.spec.slo, self.table, self.cost,
                                                  slo_overrides_ms, transfer_s, self.options.seed)
        self.profile_s = time.perf_counter() - t0
        self._sim: SampleRunner | None = None

    @property
    def simulator(self) -> SampleRunner:
        if self._sim is None:
            self._sim = SampleRunner(self.problem.workload, self.problem.mix, self.options.sim_requests,
                                  self.options.seed, self.cost, self.gpus, self.targets.seconds)
        return self._sim

    def replan(self, *, gpus: int | None = None, mix: dict[str, float] | None = None,
               space: Space = FULL, cloud: bool = False) -> PlanResult:
        """Plan again for a new budget and/or mix, reusing this planner's profile and targets."""
        problem = self.problem
        if gpus is not None:
            problem = problem.with_budget(gpus)
        if mix is not None:
            problem = problem.with_mix(mix)
        other = Planner(problem, options=self.options, cost=self.cost, table=self.table, targets=self.targets,
                        policy=self.policy_name, transfer_s=self.transfer_s, gpus=self.gpus,
                        progress=self.progress)
        return other.run(space, cloud=cloud)

    # ---- main loop ------------------------------------------------------------------------
    def run(self, space: Space = FULL, *, cloud: bool = False) -> PlanResult:
        t0 = time.perf_counter()
        slo = target_array(self.targets, self.problem.types)
        found = Search(self.problem, self.table, space, self.options, slo, self.transfer_s, self.score,
                       self.progress, cloud).run()
        survivors = self._shortlist(found.front, found.pool)
        t1 = time.perf_counter()
        simulated = [self._simulate(block, i, space) for block, i in survivors]
        sim_s = time.perf_counter() - t1
        best = self._select(simulated)
        st = found.stats
        if cloud:
            for s in simulated:
                found.cloud.add(np.array([s.rate]), s.sim.goodput[None, :],
                                "selected" if s is best else "simulated")
        phases = {
            "enumerated": Phase(st.raw, st.seconds["enumerate"]),
            "after_flow": Phase(st.after_flow, st.seconds["flow"]),
            "after_monte_carlo": Phase(sum(len(b.goodput) for b in found.front), st.seconds["monte_carlo"]),
            "simulated": Phase(len(simulated), sim_s),
        }
        extra = {"selected_logical_rank": found.ranks.get(best.logical) if best else None}
        return PlanResult(space.name, self.problem, self.targets, self.options, best, simulated, phases,
                          st, found.cloud, time.perf_counter() - t0, extra)

    def _shortlist(self, front: list[Block], pool: list[Block]) -> list[tuple[Block, int]]:
        """Up to ``max_simulated`` plans: the Monte Carlo Pareto front by policy score, then
        (when the front is smaller than the simulation budget) the best-scoring other plans of
        the pool, since the estimate's per-type error can exceed the Pareto tolerance. Plans
        that differ only in the max batch of their nodes count once (the best of them), so the
        simulator sees different allocations rather than near-copies; the bottleneck's max
        batch is part of the allocation (it trades its latency against the flow bound). Copies
        of one node side by side count in either order."""
        flat = [(b, i) for b in front for i in range(len(b.goodput))]
        rest = [(b, i) for b in pool for i in range(len(b.goodput))]
        if not flat:
            return []
        pi = self.problem.pi()
        score = self.score(np.stack([b.goodput[i] for b, i in flat]), pi)
        order = [flat[k] for k in np.argsort(-score, kind="stable")]
        if rest:
            extra = self.score(np.stack([b.goodput[i] for b, i in rest]), pi)
            order += [rest[k] for k in np.argsort(-extra, kind="stable")]
        unique: list[tuple[Block, int]] = []
        seen: set[tuple[object, ...]] = set()
        for b, i in order:
            key = self._key(b, i, pi)
            if key in seen:
                continue
            seen.add(key)
            unique.append((b, i))
            if len(unique) >= 4 * self.options.max_simulated:
                break
        # half of the slots: the best plan of each logical plan in turn, so that a structure the
        # estimate misranks still reaches the simulator; then the best remaining plans
        n = self.options.max_simulated
        chosen: list[int] = []
        lps: set[str] = set()
        for k, (b, _) in enumerate(unique):
            if len(chosen) >= n // 2:
                break
            if b.cands.lp.describe() not in lps:
                lps.add(b.cands.lp.describe())
                chosen.append(k)
        chosen += [k for k in range(len(unique)) if k not in chosen][: n - len(chosen)]
        return [unique[k] for k in sorted(chosen)]

    @staticmethod
    def _key(b: Block, i: int, pi: np.ndarray) -> tuple[object, ...]:
        c = b.cands
        tps = tuple(int(c.costs[n].tp[c.opt[i, n]]) for n in range(len(c.costs)))
        demand = c.share[c.vec[i]] * pi[None, :]
        load = np.array([c.costs[n].s_full[c.opt[i, n]] @ demand[n] for n in range(len(c.costs))])
        tight = [x > 0 and c.cnt[i, n] / x <= c.rate[i] * (1 + 1e-9) for n, x in enumerate(load)]
        binding = tuple(int(c.opt[i, n]) if tight[n] else -1 for n in range(len(load)))
        # per node instance, sorted: side-by-side copies of one node listed in either order
        # (with their traffic) are one physical plan
        return (c.lp.describe(), tuple(sorted(
            (c.costs[n].name, int(c.cnt[i, n]), tps[n], binding[n], tuple(np.round(demand[n], 4)))
            for n in range(len(load)))))

    def _simulate(self, block: Block, i: int, space: Space) -> Simulated:
        c = block.cands
        rate = float(c.rate[i])
        spec = to_spec(c, i, self.problem.model, self.problem.gpu.name, self.problem.gpus,
                       self.transfer_s * 1e3, name=f"{self.problem.model.name}-{space.name}")
        outcome = self.simulator.run(spec, self.options.alpha * rate)
        return Simulated(spec, rate, block.goodput[i], outcome, c.lp.describe())

    def _select(self, simulated: list[Simulated]) -> Simulated | None:
        if not simulated:
            return None
        good = np.stack([s.sim.goodput for s in simulated])
        front = pareto_front(good)
        score = self.score(good[front], self.problem.pi())
        best = simulated[int(front[int(np.argmax(score))])]
        best.spec = best.spec.model_copy(update={"meta": self._meta(best, simulated), "slo": self.targets,
                                                 "prediction": self._prediction(best)})
        return best

    def _prediction(self, best: Simulated) -> Prediction:
        """The typed ``prediction`` of the plan file: the load simulated and its goodput."""
        types = self.problem.types
        per = {t: round(float(g), 4) for t, g in zip(types, best.sim.goodput, strict=True)}
        return Prediction(workload=workload_ref(self.problem.workload),
                          mix={t: round(float(f), 6) for t, f in self.problem.mix.items()},
                          offered_rps=round(best.sim.rate, 6), requests=self.options.sim_requests,
                          seed=self.options.seed,
                          goodput_rps=PredictedGoodput(total=round(float(best.sim.goodput.sum()), 4),
                                                       per_type=per))

    def _meta(self, best: Simulated, simulated: list[Simulated]) -> dict[str, Any]:
        wl = self.problem.workload
        return {
            "monte_carlo_goodput_rps": round(float(best.mc.sum()), 4),
            "flow_bound_rps": round(best.rate, 4),
            "provenance": {
                "planner": f"omniplane {__version__} (Cornfigurator, arXiv plan pipeline)",
                "workload": wl.spec.name,
                "gpu_budget": self.problem.gpus,
                "policy": self.policy_name,
                "options": {k: getattr(self.options, k) for k in ("k_c", "k_s", "routing_step", "routing",
                                                                    "alpha", "mc_samples", "sim_requests",
                                                                    "max_simulated", "seed")},
                "logical_plan": best.logical,
            },
        }
