"""The spatial controller (HorizonServe section 4.4, Equation 1): the shared stage's SM cap.

Per step, from the downstream activity ``A(t)`` and the GPU memory-activity signal ``B(t)``::

    B_hat(t) = gamma B(t) + (1 - gamma) B_hat(t - 1)          EWMA, gamma = 0.4 (section 6.4)
    rho(t)   = clamp(B_hat(t) / B_sat, 0, 1)
    s*(t)    = S_aggr                                          if A(t) = 0
             = snap_S(S_min + rho(t) (S_cap - S_min))          if A(t) > 0         (Equation 1)
    s_down   = max(0, S_tot - s_shared)                        downstream headroom

Hysteresis (Algorithm 1, step 3): while co-running, the cap moves off its ladder level only when
the unsnapped target ``S_min + rho (S_cap - S_min)`` has reached the next level up or down, i.e.
differs from the current level by at least one ladder step; entering co-running (from
``S_aggr``) and leaving it apply at once. With throttling off (the no-SM-throttle ablation) the
controller publishes no cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from omniplane.sched.ladder import Ladder


@dataclass(frozen=True)
class SpatialConfig:
    """``gamma``: EWMA weight of the newest sample; ``b_sat``: the memory-activity level taken
    as saturation; ``throttle``: publish a cap at all."""

    gamma: float = 0.4  # HorizonServe section 6.4 ("smoothed with an EWMA (gamma = 0.4)")
    # derived: Figure 4(a), DRAM utilisation "rises to about 93% of peak" once the downstream
    # stage co-runs ("HBW near peak"); the paper does not state B_sat itself
    b_sat: float = 0.93
    throttle: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"SpatialConfig.gamma must be in (0, 1], got {self.gamma}")
        if not 0.0 < self.b_sat <= 1.0:
            raise ValueError(f"SpatialConfig.b_sat must be in (0, 1], got {self.b_sat}")


@dataclass(slots=True)
class SpatialDecision:  # read-only by convention (built every step: a plain dataclass is cheaper)
    sm_shared: int | None  # the shared stage's cap (None: no cap published)
    sm_down: int  # downstream headroom S_tot - s_shared
    pressure: float  # B_hat
    rho: float
    co_running: bool


class SpatialController:
    def __init__(self, ladder: Ladder, config: SpatialConfig | None = None) -> None:
        self.ladder = ladder
        self.config = config or SpatialConfig()
        self.pressure = 0.0  # B_hat
        self._started = False
        self._gamma = self.config.gamma
        self._inv_sat = 1.0 / self.config.b_sat
        self._level: int | None = None  # current ladder index while co-running
        self.cap = ladder.s_aggr

    def observe(self, bw_util: float) -> float:
        """Fold one memory-activity sample (a fraction of peak) into ``B_hat``."""
        b = 0.0 if bw_util < 0.0 else (1.0 if bw_util > 1.0 else bw_util)
        if self._started:
            self.pressure += self._gamma * (b - self.pressure)  # = gamma b + (1 - gamma) B_hat
        else:  # the first sample initialises the average
            self.pressure, self._started = b, True
        return self.pressure

    def select(self, downstream_active: int) -> int | None:
        """Step 3 of Algorithm 1 (call :meth:`observe` first): the shared stage's cap alone
        (None with throttling off); :meth:`decide` is the same with the whole decision."""
        if not self.config.throttle:
            return None
        lad = self.ladder
        if downstream_active <= 0:
            self._level = None
            self.cap = lad.s_aggr
            return self.cap
        rho = self.pressure * self._inv_sat
        rho = 0.0 if rho < 0.0 else (1.0 if rho > 1.0 else rho)
        target = lad.s_min + rho * (lad.s_cap - lad.s_min)
        lv, i = lad.levels, self._level
        # entering co-running, or the target reached a neighbouring level: move
        if i is None or (i + 1 < len(lv) and target >= lv[i + 1]) or (i > 0 and target <= lv[i - 1]):
            i = lad.snap(target)
        self._level = i
        self.cap = lv[i]
        return self.cap

    def decide(self, downstream_active: int) -> SpatialDecision:
        """:meth:`select`, with the pressure, ``rho`` and the downstream headroom."""
        cap = self.select(downstream_active)
        rho = self.pressure * self._inv_sat
        rho = 0.0 if rho < 0.0 else (1.0 if rho > 1.0 else rho)
        co = downstream_active > 0
        if cap is None:
            return SpatialDecision(None, 0, self.pressure, rho, co)
        return SpatialDecision(cap, max(0, self.ladder.s_total - cap), self.pressure, rho, co)
