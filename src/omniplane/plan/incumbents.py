"""The search's two incumbents and the thresholds they set (:mod:`omniplane.plan.search`).

Every plan's estimated goodput is at most ``alpha x R_d`` and its simulated goodput at most
``factor x R_d`` (``factor``: ``alpha`` times the simulated sample's arrivals per unit of
offered rate, at least 1). The best estimate so far prunes plans whose bound is below
``(1 - mc_tolerance)`` of it (the ``estimate`` rule); the best simulated plan prunes plans whose
bound is below it (``exact``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Incumbents:
    factor: float  # policy score <= factor x R_d, simulated or estimated
    alpha: float
    tolerance: float  # mc_tolerance
    estimate: float = 0.0  # best estimated score so far
    simulated: float = 0.0  # best simulated score so far

    def goodput_bound(self, rate: np.ndarray | float) -> np.ndarray:
        """Upper bound on the policy score of plans with flow rate ``rate`` (simulated or
        estimated: the estimate's per-type goodput is at most ``alpha R_d pi_t``)."""
        return np.asarray(self.factor * np.asarray(rate))

    def estimate_floor(self) -> float:
        """Plans whose estimate (or estimate bound) is below this are dropped (``estimate``)."""
        return (1.0 - self.tolerance) * self.estimate

    def threshold(self) -> float:
        """Plans with ``R_d`` below this cannot beat the incumbents."""
        return max(self.simulated / self.factor, self.estimate_floor() / self.alpha)

    def exact_binds(self) -> bool:
        """The best simulated plan, not the estimate floor, sets the threshold now."""
        return self.simulated / self.factor >= self.estimate_floor() / self.alpha
