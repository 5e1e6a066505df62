"""Planner options (Cornfigurator sections 4.2, 4.3 and 6.7) with their defaults and sources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RoutingMode = Literal["grid", "lp"]


@dataclass(frozen=True)
class PlannerOptions:
    """Knobs of the planning pipeline.

    k_c             simple subplans merged into one compound subplan (paper default 2, section 4.2)
    k_s             subplans composed into one logical plan (paper default 2, section 4.2)
    routing_step    routing probability granularity (paper default 0.1, section 4.2)
    routing         "grid": routing probabilities enumerated on the ``routing_step`` grid (the
                    only mode implemented; "lp", the flow bound as an LP over routing
                    fractions, is refused: docs/plan.md, "Routing")
    alpha           headroom: later phases run at alpha x R_d. The paper reports robustness
                    over its sweep (section 6.7, Table 5) but its default is not in the text we
                    have. derived: our flow bound overestimates single LLM executors' simulated
                    saturation throughput by 5-20% (docs/plan.md, "Accuracy"), so 0.8 x R_d
                    stays at or below the knee.
    mc_samples      requests sampled per type for the Monte Carlo phase (assumption: 128, a
                    +-4.4 point binomial standard error on a 50% attainment, shared by all
                    candidates as common random numbers)
    mc_tolerance    Pareto pruning after the Monte Carlo phase drops a plan only when another is
                    better by this margin in every type (and the flow threshold shrinks by it):
                    the estimate's aggregate error is ~10% (Cornfigurator section 6.5: 10.7%;
                    docs/plan.md measures ours), so closer plans go on to the simulator
    sim_requests    requests per simulated survivor (assumption: sized so the whole pipeline
                    fits the 30 s goal; docs/plan.md, "Simulation budget")
    max_simulated   survivors of the Monte Carlo phase simulated at most (paper: 25 for
                    Qwen3-Omni on 16 GPUs, section 6.8, Table 6)
    max_logical     logical plans expanded into physical plans at most, best priority first
                    (a time guard; reported when it binds). measured (bench/bench_plan.py,
                    Qwen3-Omni, 16 x A100, docs/plan.md "Options"): 150 instead of 400 keeps
                    the pick at 1/3 audio (rank #112) and loses 2.3% at 2/3 audio (the 400-run
                    pick ranks #252) for a third of the CPU time
    max_routings    routing vectors per logical plan on the grid before types with the same
                    routes share a split (docs/plan.md, "Routing"); 121 = two types or classes
                    with two routes each
    max_configs     config vectors x routing vectors per logical plan before only the
                    bottleneck node enumerates every max batch (docs/plan.md, "Config guard")
    seed            seed of the workload sample and the simulations
    """

    k_c: int = 2
    k_s: int = 2
    routing_step: float = 0.1
    routing: RoutingMode = "grid"
    alpha: float = 0.8
    mc_samples: int = 128
    mc_tolerance: float = 0.1
    sim_requests: int = 1200
    max_simulated: int = 12
    max_logical: int = 150
    max_routings: int = 121
    max_configs: int = 20000
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
                             "implemented; use 'grid' (docs/plan.md, \"Routing\")")
        if self.routing != "grid":
            raise ValueError(f"routing must be 'grid', got {self.routing!r}")
        for name in ("mc_samples", "sim_requests", "max_simulated", "max_logical", "max_routings",
                     "max_configs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def grid_steps(self) -> int:
        """Routing grid points per unit probability (10 for a 0.1 step)."""
        return round(1.0 / self.routing_step)
