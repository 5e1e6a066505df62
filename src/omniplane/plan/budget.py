"""The search's work budgets (docs/guides/plan.md, "Scale: the Monte Carlo budget"):
``mc_budget`` Monte Carlo estimates per plan space (on by default) and ``time_budget_s`` on the
clock. What either leaves out is a ``budget`` cut in the ledger (:mod:`omniplane.plan.drops`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class WorkBudget:
    def __init__(self, mc_budget: int | None, time_budget_s: float | None,
                 clock: Callable[[], float]) -> None:
        self.mc_budget = mc_budget
        self.mc_left = mc_budget  # Monte Carlo estimates left (None: no budget)
        self.time_budget_s = time_budget_s
        self.clock = clock
        self.t0 = clock()

    def out_of_time(self) -> bool:
        tb = self.time_budget_s
        return tb is not None and self.clock() - self.t0 > tb

    def mc_spent(self) -> bool:
        """The Monte Carlo budget is spent."""
        return self.mc_left is not None and self.mc_left <= 0

    def affords(self, n: int) -> bool:
        """``n`` more Monte Carlo estimates fit in the budget."""
        return self.mc_left is None or self.mc_left >= n

    def spend(self, n: int) -> None:
        if self.mc_left is not None:
            self.mc_left -= n

    def best_first(self, ub: np.ndarray, fit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The plans of ``fit`` the budget's last estimates go to, those of the highest estimate
        bound ``ub`` (in ``fit``'s order), and the others (highest bound first)."""
        left = max(0, self.mc_left or 0)
        order = fit[np.argsort(-ub[fit], kind="stable")]
        return np.sort(order[:left]), order[left:]
