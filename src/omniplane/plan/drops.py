"""What the branch and bound (:mod:`omniplane.plan.search`) drops, in the words its ledger
records (:mod:`omniplane.plan.explain`, ``omniplane plan --explain``): one method per rule, by
phase, each naming the rule's kind (``exact``, ``estimate``, ``heuristic``, ``budget``)."""

from __future__ import annotations

from omniplane.plan.explain import Ledger
from omniplane.plan.logical import LogicalPlan
from omniplane.plan.options import PlannerOptions

SIM_BOUND = "goodput bound below the best simulated plan"


class SearchDrops:
    def __init__(self, ledger: Ledger, options: PlannerOptions) -> None:
        self.ledger = ledger
        self.tol = f"{options.mc_tolerance:g}"
        self.mc = f"--mc-budget {options.mc_budget}"
        self.max_routings = options.max_routings

    def threshold_rule(self, exact: bool) -> tuple[str, str]:
        """(kind, rule) of the threshold: the best simulated plan's (``exact``) or the estimate
        floor's."""
        if exact:
            return "exact", SIM_BOUND
        return "estimate", f"goodput bound below (1 - {self.tol}) x the best estimate"

    # ---- enumerate ------------------------------------------------------------------------------
    def compound_pairs(self, n: float) -> None:
        self.ledger.drop("enumerate", "side-by-side pairs with a compound subplan (--compose-compound "
                         "to include)", "heuristic", "logical plans", n)

    def below_threshold(self, exact: bool, n: int, lp: LogicalPlan, bound: float, threshold: float) -> None:
        """``n`` logical plans, the best ``lp`` of goodput bound ``bound``, below the threshold
        (as goodput)."""
        kind, rule = self.threshold_rule(exact)
        self.ledger.drop("enumerate", rule, kind, "logical plans", n, value=bound,
                         example=f"{lp.describe()}: bound {bound:.2f} req/s, threshold {threshold:.2f}")

    def not_expanded_mc(self, n: int, lp: LogicalPlan, bound: float, best_estimate: float) -> None:
        self.ledger.drop("enumerate", f"{self.mc}: Monte Carlo budget spent, logical plans not expanded",
                         "budget", "logical plans", n, value=bound,
                         example=f"{lp.describe()}: bound {bound:.2f} req/s "
                                 f"(best estimate {best_estimate:.2f})")

    def not_expanded_time(self, n: int, lp: LogicalPlan, bound: float) -> None:
        self.ledger.drop("enumerate", "time budget: logical plans not expanded", "budget", "logical plans", n,
                         value=bound, example=f"{lp.describe()}: bound {bound:.2f} req/s")

    def infeasible(self, n: int) -> None:
        self.ledger.drop("enumerate", "minimum GPUs exceed the budget", "exact", "logical plans", n)

    # ---- flow -----------------------------------------------------------------------------------
    def tied_routing(self, lp: LogicalPlan, full: float, kept: int) -> None:
        """``lp``'s per-type routing grid of ``full`` vectors, tied across types to ``kept``."""
        self.ledger.drop("flow", f"routing splits tied across types (per-type grid > {self.max_routings} "
                         "vectors)", "heuristic", "routing vectors", full - kept, value=float(full),
                         example=f"{lp.describe()}: {kept} of {full:.3g} vectors")

    def not_built(self, n: float, mc_spent: bool) -> None:
        """Physical plans of an expanded logical plan that were not built."""
        if mc_spent:  # the budget stopped this expansion: what was not built is not all exact
            self.ledger.drop("flow", f"{self.mc}: not built (redundant, below the threshold, or left when "
                             "the Monte Carlo budget was spent)", "budget", "physical plans", n)
        else:
            self.ledger.drop("flow", "not built: redundant capacity (section 4.3) or flow rate below the "
                             "threshold (and plans of rows the row estimate bound dropped, counted above as "
                             "rows)", "exact", "physical plans", n)

    def rows_not_built_mc(self, n: int, lp: LogicalPlan, top: float) -> None:
        """``n`` rows above the threshold left when the budget was spent, the best of rate ``top``."""
        self.ledger.drop("flow", f"{self.mc}: Monte Carlo budget spent, plans of rows above the threshold "
                         "not built", "budget", "rows (config x routing vectors)", n, value=top,
                         example=f"{lp.describe()}: row rate {top:.2f}/s")

    def rows_estimate_bounded(self, n: int) -> None:
        self.ledger.drop("flow", "estimate bound of the row (no waits, any occupancy, its top rate) below "
                         f"(1 - {self.tol}) x the best estimate: not built", "estimate",
                         "rows (config x routing vectors)", n)

    def groups_only_around_best(self, n: int, plans: int) -> None:
        """``n`` logical plans beyond the ``plans`` best not tried with executor groups."""
        self.ledger.drop("flow", "two executor groups per node tried only around the best plan of the "
                         f"{plans} best logical plans", "heuristic", "logical plans", n)

    def groups_same_config(self, n: int) -> None:
        self.ledger.drop("flow", "two executor groups of the same config (a type-partitioned split of "
                         "identical executors) not explored: groups mix configs (Cornfigurator 4.2)",
                         "heuristic", "plans", n)

    def groups_not_tried_mc(self, n: int) -> None:
        self.ledger.drop("flow", f"{self.mc}: Monte Carlo budget spent, two executor groups per node not "
                         "tried", "budget", "logical plans", n)

    # ---- Monte Carlo ----------------------------------------------------------------------------
    def not_estimated_mc(self, n: int, lp: LogicalPlan, bound: float, best_estimate: float) -> None:
        """``n`` plans above the estimate floor the budget left out, the best of estimate bound
        ``bound``."""
        self.ledger.drop("monte_carlo", f"{self.mc}: Monte Carlo budget spent, plans above the estimate "
                         "floor not estimated", "budget", "physical plans", n, value=bound,
                         example=f"{lp.describe()}: estimate bound {bound:.2f} req/s (best estimate "
                                 f"{best_estimate:.2f})")

    def estimate_bounded(self, n: int) -> None:
        self.ledger.drop("monte_carlo", "estimate bound (no waits, lightest occupancy) below "
                         f"(1 - {self.tol}) x the best estimate: not estimated", "estimate", "physical plans",
                         n)

    def pruned(self, exact: bool, bounded: int, low: int, dominated: int) -> None:
        """One pruning of the pool: rows below the threshold, estimates below the floor,
        Pareto-dominated estimates."""
        kind, rule = self.threshold_rule(exact)
        self.ledger.drop("monte_carlo", rule, kind, "physical plans", bounded)
        self.ledger.drop("monte_carlo", f"estimate below (1 - {self.tol}) x the best estimate", "estimate",
                         "physical plans", low)
        self.ledger.drop("monte_carlo", "Pareto-dominated on the estimate within its logical plan",
                         "estimate", "physical plans", dominated)

    # ---- simulate -------------------------------------------------------------------------------
    def not_simulated_bound(self) -> None:
        self.ledger.drop("simulate", SIM_BOUND, "exact", "physical plans", 1)

    def not_simulated_ratio(self, lp: LogicalPlan, est: float, ratio: float) -> None:
        self.ledger.drop("simulate", "estimate x its logical plan's best simulated / estimated ratio x "
                         f"(1 + {self.tol}) below the best simulated plan", "estimate", "physical plans", 1,
                         value=est, example=f"{lp.describe()}: estimate {est:.2f} x {ratio:.3f}")

    def not_simulated_budget(self, lp: LogicalPlan, est: float, out_of_time: bool, limit: int | None) -> None:
        rule = "time budget: survivors not simulated" if out_of_time else \
            f"--max-simulated {limit}: survivors not simulated"
        self.ledger.drop("simulate", rule, "budget", "physical plans", 1, value=est,
                         example=f"{lp.describe()}: estimate {est:.2f} req/s")
