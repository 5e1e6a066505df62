"""Planner options (Cornfigurator sections 4.2, 4.3 and 6.7) with their defaults and sources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RoutingMode = Literal["grid", "lp"]

# Monte Carlo estimates per plan space (``mc_budget``'s default). derived from cost, not from a
# pick: an estimate costs about 0.2 ms of CPU at 128 samples per type (docs/results/benchmarks.md,
# "Planner search at 8 / 16 / 32 / 64 GPUs"), so 40,000 are about 8 s, which keeps 64 GPUs within
# the 60 s goal (issue 14) with flow, simulation and the baselines. It binds from 16 GPUs up on Qwen3-Omni.
MC_BUDGET = 40_000


@dataclass(frozen=True)
class PlannerOptions:
    """Knobs of the planning pipeline.

    k_c             simple subplans merged into one compound subplan (paper default 2, section 4.2)
    k_s             subplans composed into one logical plan (paper default 2, section 4.2)
    routing_step    routing probability granularity (paper default 0.1, section 4.2)
    routing         "grid": routing probabilities enumerated on the ``routing_step`` grid (the
                    only mode implemented; "lp", the flow bound as an LP over routing
                    fractions, is refused: docs/guides/plan.md, "Routing")
    alpha           headroom: later phases run at alpha x R_d. The paper reports robustness
                    over its sweep (section 6.7, Table 5) but its default is not in the text we
                    have. derived: our flow bound overestimates single LLM executors' simulated
                    saturation throughput by 5-20% (docs/guides/plan.md, "Options and their
                    sources"), so 0.8 x R_d stays at or below the knee.
    mc_samples      requests sampled per type for the Monte Carlo phase and the latency targets
                    (assumption: 128, a +-4.4 point binomial standard error on a 50% attainment,
                    shared by all candidates as common random numbers). The isolated-best
                    targets move with it (64 samples gave ti2t 716 ms against 178 ms with 128 on
                    Qwen3-Omni: a near-tie between two isolated deployments flips), so it stays at 128
    mc_tolerance    plans whose estimated score (or its bound) is below (1 - mc_tolerance) x the
                    best estimate are dropped; the rest (each logical plan's Pareto front on the
                    estimate) are simulated. measured (docs/guides/plan.md, "Options and their
                    sources"): on Qwen3-Omni at 8 GPUs, with 0.1 every plan simulating within
                    1.5% of the best had an estimate within 2% of the best estimate (141 plans
                    simulated), so 0.03 keeps them for far fewer simulations; an estimate rule,
                    reported as such
    sim_requests    requests per simulated plan (assumption: sized so that simulating every
                    Pareto survivor stays within seconds; docs/guides/plan.md, "Simulation budget")
    max_simulated   plans simulated at most (None: every Pareto survivor whose bound beats the
                    best simulated plan, as the paper simulates all its survivors, section
                    6.8); when it binds, the output lists it as a cut. When set and not spent
                    by the survivors, the rest goes to plans the estimate rules dropped (each
                    logical plan's 8 best by estimate), so a misranked plan can still win
    mc_budget       physical plans estimated by Monte Carlo at most per plan space (None: no
                    limit). A work budget, so that the planning time stops growing with the GPU
                    budget: from 32 GPUs up hundreds of logical plans tie on the flow bound and on
                    the estimate bound within the tolerance (docs/guides/plan.md, "Scale: the Monte
                    Carlo budget"). Within each Monte Carlo step the plans with the highest
                    estimate bound go first; when it binds, the plans not estimated and the
                    logical plans not expanded are listed as ``budget`` cuts with the highest
                    bound they had (how much could be lost on the estimate). Default
                    ``MC_BUDGET`` (sized by cost: docs/results/benchmarks.md)
    time_budget_s   wall-clock seconds the search may take (None: no limit). When it binds,
                    logical plans not expanded and survivors not simulated are listed as cuts
    compose_compound  also compose pairs with a compound subplan side by side (the paper's k_s
                    space; about 1.9 million more logical plans for Qwen3-Omni). Off by default:
                    the pairs left out are reported as a cut (docs/guides/plan.md, "Logical plans")
    max_routings    routing vectors per logical plan on the grid before types with the same
                    routes share a split (docs/guides/plan.md, "Routing"); 121 = two types or classes
                    with two routes each. A heuristic: listed as a cut when it binds
    seed            seed of the workload sample and the simulations
    """

    k_c: int = 2
    k_s: int = 2
    routing_step: float = 0.1
    routing: RoutingMode = "grid"
    alpha: float = 0.8
    mc_samples: int = 128
    mc_tolerance: float = 0.03
    sim_requests: int = 1200
    max_simulated: int | None = None
    mc_budget: int | None = MC_BUDGET
    time_budget_s: float | None = None
    max_routings: int = 121
    compose_compound: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.k_c < 1 or self.k_s < 1:
            raise ValueError(f"k_c and k_s must be >= 1 (got k_c={self.k_c}, k_s={self.k_s})")
        steps = 1.0 / self.routing_step if self.routing_step > 0 else 0.0
        if not (0 < self.routing_step <= 1) or abs(steps - round(steps)) > 1e-9:
            raise ValueError(f"routing_step must divide 1 (e.g. 0.1, 0.25), got {self.routing_step}")
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")
        if not 0 <= self.mc_tolerance < 1:
            raise ValueError(f"mc_tolerance must be in [0, 1), got {self.mc_tolerance}")
        if self.routing == "lp":
            raise ValueError("routing 'lp' (the flow bound as an LP over routing fractions) is not "
                             "implemented; use 'grid' (docs/guides/plan.md, \"Routing\")")
        if self.routing != "grid":
            raise ValueError(f"routing must be 'grid', got {self.routing!r}")
        for name in ("mc_samples", "sim_requests", "max_routings"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_simulated is not None and self.max_simulated < 1:
            raise ValueError(f"max_simulated must be >= 1 (or unset), got {self.max_simulated}")
        if self.mc_budget is not None and self.mc_budget < 1:
            raise ValueError(f"mc_budget must be >= 1 (or unset), got {self.mc_budget}")
        if self.time_budget_s is not None and not self.time_budget_s > 0:
            raise ValueError(f"time_budget_s must be > 0 seconds (or unset), got {self.time_budget_s}")

    @property
    def grid_steps(self) -> int:
        """Routing grid points per unit probability (10 for a 0.1 step)."""
        return round(1.0 / self.routing_step)
