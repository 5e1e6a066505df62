"""The planner: profile -> enumerate -> flow -> Monte Carlo -> simulate -> select.

``Planner(problem).run()`` is the whole of Cornfigurator's Algorithms 1 and 2 over a plan space
(the full space, or a baseline's restriction). The profile (:class:`CostTable`) and the latency
targets are built once per planner and reused by :meth:`Planner.replan` for a new GPU budget
or type mix (section 4.4).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from omniplane import __version__
from omniplane.perf import GUIDANCE_PASSES, CostModel
from omniplane.plan.costs import CostTable
from omniplane.plan.disagg import Split
from omniplane.plan.emit import to_spec
from omniplane.plan.explain import Ledger
from omniplane.plan.flow import Candidates
from omniplane.plan.options import PlannerOptions
from omniplane.plan.pool import Cloud, Counts, SearchStats, Simulated
from omniplane.plan.problem import Problem
from omniplane.plan.progress import NO_PROGRESS, Progress
from omniplane.plan.refine import SampleRunner, SimOutcome
from omniplane.plan.search import Search
from omniplane.plan.select import bound_factor, pareto_front, selection_policy
from omniplane.plan.space import FULL, Space
from omniplane.slo.resolve import DEFAULT_TRANSFER_S, resolve_targets, target_array
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
class PlanResult:
    space: str
    problem: Problem
    targets: LatencyTargets
    options: PlannerOptions
    best: Simulated | None
    simulated: list[Simulated]
    phases: dict[str, Phase]
    stats: SearchStats
    counts: Counts
    ledger: Ledger
    cloud: Cloud
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def types(self) -> list[str]:
        return self.problem.types

    def per_type(self) -> dict[str, float]:
        if self.best is None:
            return dict.fromkeys(self.types, 0.0)
        return {t: float(g) for t, g in zip(self.types, self.best.outcome.goodput, strict=True)}

    @property
    def total(self) -> float:
        return float(self.best.outcome.goodput.sum()) if self.best else 0.0

    @property
    def cuts(self) -> list[dict[str, Any]]:
        return self.ledger.cuts()

    def accuracy(self) -> dict[str, float | int]:
        """Flow + Monte Carlo total goodput vs the simulator's over every simulated plan."""
        errs = [abs(s.error) for s in self.simulated if s.outcome.goodput.sum() > 0]
        if not errs:
            return {"plans": 0}
        return {"plans": len(errs), "mean_abs_error": float(np.mean(errs)),
                "median_abs_error": float(np.median(errs))}


VLLM_OMNI_SPACES = ("vllm-omni-runtime", "vllm-omni")  # the runtime space and its stock layout


class SimOracle:
    """The simulator as the search calls it: plan candidate ``i`` at ``alpha x R_d``."""

    def __init__(self, planner: Planner, space: Space) -> None:
        self.planner, self.space = planner, space
        self.specs: dict[tuple[int, int], PlanSpec] = {}
        pb = planner.problem
        per_type = planner.simulator.arrival_factor()
        self._factor = bound_factor(planner.policy_name, np.array([per_type.get(t, 0.0) for t in pb.types]),
                                    pb.pi())

    @property
    def factor(self) -> float:
        return self._factor

    def spec(self, cands: Candidates, i: int) -> PlanSpec:
        pl = self.planner
        spec = to_spec(cands, i, pl.problem.model, pl.problem.gpu.name, pl.problem.gpus, pl.transfer_s * 1e3,
                       name=f"{pl.problem.model.name}-{self.space.name}")
        if self.space.name in VLLM_OMNI_SPACES:  # stages sharing a GPU run as separate processes
            from omniplane.plan.runtime import mark_shared

            spec = mark_shared(spec, pl.problem.model)
        return spec

    def simulate(self, cands: Candidates, i: int) -> SimOutcome:
        spec = self.spec(cands, i)
        self.specs[(id(cands), i)] = spec
        return self.planner.simulator.run(spec, self.planner.options.alpha * float(cands.rate[i]))


class Planner:
    """Plans one problem; see the module docstring."""

    def __init__(self, problem: Problem, *, options: PlannerOptions | None = None,
                 cost: CostModel | None = None, table: CostTable | None = None,
                 targets: LatencyTargets | None = None,
                 policy: str = "total", transfer_s: float = DEFAULT_TRANSFER_S,
                 gpus: GPUCatalog | None = None, progress: Progress = NO_PROGRESS,
                 rate: float | None = None) -> None:
        self.problem = problem
        self.options = options or PlannerOptions()
        # None: each plan at alpha x R_d (Cornfigurator); else every plan at this offered rate
        # (plans whose flow bound is below it are not built: omniplane.plan.search, capacity planning)
        self.rate = rate
        if rate is not None:  # no headroom factor: the plans run at the rate asked
            self.options = replace(self.options, alpha=1.0)
        self.cost = cost or (table.cost if table else CostModel(problem.model))
        self.table = table or CostTable(problem, self.cost)
        self.transfer_s = transfer_s
        self.policy_name = policy
        self.score = selection_policy(policy)
        self.gpus = gpus or load_gpus()
        self.progress = progress
        t0 = time.perf_counter()
        # the latency targets: as given, else the workload's policy resolved on this profile
        self.targets = targets or resolve_targets(problem.workload.spec.slo, self.table, self.cost,
                                                  transfer_s=transfer_s, seed=self.options.seed)
        self.profile_s = time.perf_counter() - t0
        self._sim: SampleRunner | None = None
        self._derived: dict[str, Planner] = {}

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
                        progress=self.progress, rate=self.rate)
        return other.run(space, cloud=cloud)

    def _for(self, split: Split) -> Planner:
        """The planner of a space on a derived model (a prefill/decode split): the same
        request samples and simulated sample with each request's work split, the same
        latency targets and options; its own profile of the derived model's executors."""
        hit = self._derived.get(split.model.name)
        if hit is None:
            work = split.work()
            pb = replace(self.problem, model=split.model,
                         samples={t: tuple(work(w) for w in ws) for t, ws in self.problem.samples.items()})
            passes = {c: p for (m, c), (p, _) in GUIDANCE_PASSES.items() if m == self.problem.model.name}
            cost = CostModel(split.model, profiles=self.cost.profiles, calibration=self.cost.calibration,
                             memory=self.cost.memory, guidance_passes=passes)
            hit = Planner(pb, options=self.options, cost=cost, targets=self.targets, policy=self.policy_name,
                          transfer_s=self.transfer_s, gpus=self.gpus, progress=self.progress, rate=self.rate)
            hit._sim = self.simulator.derived(split.model, work, cost)
            self._derived[split.model.name] = hit
        return hit

    # ---- main loop ------------------------------------------------------------------------
    def run(self, space: Space = FULL, *, cloud: bool = False) -> PlanResult:
        if space.split is not None and space.split.model is not self.problem.model:
            return self._for(space.split).run(space, cloud=cloud)
        t0 = time.perf_counter()
        slo = target_array(self.targets, self.problem.types)
        oracle = SimOracle(self, space)
        found = Search(self.problem, self.table, space, self.options, slo, self.transfer_s, self.score,
                       oracle, self.progress, cloud, rate=self.rate).run()
        simulated = found.simulated
        for r in simulated:
            r.spec = oracle.specs[(id(r.block.cands), r.i)]
        best = self._select(simulated)
        st, counts = found.stats, found.counts
        if cloud:
            for sim in simulated:
                found.cloud.add(np.array([sim.rate]), sim.outcome.goodput[None, :],
                                "selected" if sim is best else "simulated")
        sec = st.seconds
        phases = {
            "enumerate": Phase(counts.raw_space, sec["enumerate"]),
            "flow": Phase(counts.flow, sec["flow"]),
            "monte_carlo": Phase(counts.monte_carlo, sec["monte_carlo"]),
            "simulate": Phase(counts.simulated, sec["simulate"]),
        }
        extra = {"selected_logical_rank": best.rank if best else None}
        return PlanResult(space.name, self.problem, self.targets, self.options, best, simulated, phases,
                          st, counts, found.ledger, found.cloud, time.perf_counter() - t0, extra)

    def _select(self, simulated: list[Simulated]) -> Simulated | None:
        if not simulated:
            return None
        good = np.stack([s.outcome.goodput for s in simulated])
        front = pareto_front(good)
        score = self.score(good[front], self.problem.pi())
        return self.finish(simulated[int(front[int(np.argmax(score))])], simulated)

    def finish(self, best: Simulated, simulated: list[Simulated]) -> Simulated:
        """``best`` with its plan file completed (meta, latency targets, prediction)."""
        best.spec = best.plan.model_copy(update={"meta": self._meta(best, simulated), "slo": self.targets,
                                                 "prediction": self._prediction(best)})
        return best

    def _prediction(self, best: Simulated) -> Prediction:
        """The typed ``prediction`` of the plan file: the load simulated and its goodput. The mix
        is written as the problem holds it, unrounded: rounded fractions need not sum to 1 within
        the spec's tolerance (1/6, 1/6, 2/3 to 6 decimals sum to 1.000001)."""
        types = self.problem.types
        per = {t: round(float(g), 4) for t, g in zip(types, best.outcome.goodput, strict=True)}
        return Prediction(workload=workload_ref(self.problem.workload),
                          mix={t: float(f) for t, f in self.problem.mix.items()},
                          offered_rps=round(best.outcome.rate, 6), requests=self.options.sim_requests,
                          seed=self.options.seed,
                          goodput_rps=PredictedGoodput(total=round(float(best.outcome.goodput.sum()), 4),
                                                       per_type=per))

    def _meta(self, best: Simulated, simulated: list[Simulated]) -> dict[str, Any]:
        wl = self.problem.workload
        return {
            "monte_carlo_goodput_rps": round(float(best.estimate.sum()), 4),
            # at a fixed rate R_d is clipped to it (omniplane.plan.search): the rate, not R_d
            **({"flow_bound_rps": round(best.rate, 4)} if self.rate is None else
               {"evaluated_at_rps": self.rate}),
            "provenance": {
                "planner": f"omniplane {__version__} (Cornfigurator, arXiv plan pipeline)",
                "workload": wl.spec.name,
                "gpu_budget": self.problem.gpus,
                "policy": self.policy_name,
                "options": {k: getattr(self.options, k) for k in ("k_c", "k_s", "routing_step", "routing",
                                                                    "alpha", "mc_samples", "sim_requests",
                                                                    "max_simulated", "mc_budget",
                                                                    "time_budget_s", "max_routings", "seed")},
                "logical_plan": best.logical,
            },
        }
