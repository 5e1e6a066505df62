"""The spatial controller (HorizonServe section 4.4, Equation 1): the shared stage's SM cap.

Per step, from the downstream activity ``A(t)`` and the GPU memory-activity signal ``B(t)``::

    B_hat(t) = gamma B(t) + (1 - gamma) B_hat(t - 1)          EWMA, gamma = 0.4 (section 6.4)
    rho(t)   = clamp(B_hat(t) / B_sat, 0, 1)
    s*(t)    = S_aggr                                          if A(t) = 0
             = snap_S(S_min + rho(t) (S_cap - S_min))          if A(t) > 0         (Equation 1)
    s_down   = max(0, S_tot - s_shared)                        downstream headroom

Hysteresis, the paper's (Algorithm 1, step 3: "Apply it if downstream stages are inactive or the
ladder level changes by Delta_step; otherwise keep s_prev"; section 4.4: "changes the cap only
when the new ladder level differs from the previous cap by at least one ladder step"): while
co-running, ``s*`` is snapped to the ladder first and replaces the previous cap when its level
index differs from the previous cap's by at least ``delta_step`` levels (default 1, "one ladder
step"; with 1 every change of the snapped level applies). Entering co-running (from ``S_aggr``)
and leaving it apply at once. With throttling off (the no-SM-throttle ablation) the controller
publishes no cap. (Before this rule the cap moved only once the *unsnapped* target had
reached the neighbouring level, a dead band of half a level each side that is not in the paper:
docs/decisions/0103-hysteresis-dead-band.md.)
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from omniplane.sched.ladder import Ladder


@dataclass(frozen=True)
class SpatialConfig:
    """``gamma``: EWMA weight of the newest sample; ``b_sat``: the memory-activity level taken
    as saturation; ``delta_step``: ladder levels the snapped target must move before the cap
    follows (Algorithm 1's Delta_step); ``throttle``: publish a cap at all."""

    gamma: float = 0.4  # HorizonServe section 6.4 ("smoothed with an EWMA (gamma = 0.4)")
    # derived: Figure 4(a), DRAM utilisation "rises to about 93% of peak" once the downstream
    # stage co-runs ("HBW near peak"); the paper does not state B_sat itself
    b_sat: float = 0.93
    # section 4.4: "at least one ladder step" (the paper gives no other value)
    delta_step: int = 1
    throttle: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"SpatialConfig.gamma must be in (0, 1], got {self.gamma}")
        if not 0.0 < self.b_sat <= 1.0:
            raise ValueError(f"SpatialConfig.b_sat must be in (0, 1], got {self.b_sat}")
        if self.delta_step < 1:
            raise ValueError(f"SpatialConfig.delta_step must be >= 1 ladder level, got {self.delta_step}")


@dataclass(slots=True)
class SpatialDecision:  # read-only by convention (built every step: a plain dataclass is cheaper)
    sm_shared: int | None  # the shared stage's cap (None: no cap published)
    sm_down: int  # downstream headroom S_tot - s_shared
    pressure: float  # B_hat
    rho: float
    co_running: bool


def level_thresholds(ladder: Ladder, b_sat: float) -> tuple[float, ...]:
    """The ``B_hat`` values at which Equation 1's snapped level changes while co-running: level
    ``i + 1`` is chosen once ``S_min + rho (S_cap - S_min)`` passes the midpoint of levels ``i``
    and ``i + 1`` (ties to the lower), i.e. ``B_hat > b_sat (mid - S_min) / (S_cap - S_min)``. With
    one level (or ``S_cap = S_min``) there is none. Figure 10's diagnosis: where ``B_hat`` sits
    between these, the cap cannot follow it."""
    lv = ladder.levels
    span = ladder.s_cap - ladder.s_min
    if len(lv) < 2 or span <= 0:
        return ()
    return tuple(b_sat * ((a + b) / 2.0 - ladder.s_min) / span for a, b in pairwise(lv))


class SpatialController:
    def __init__(self, ladder: Ladder, config: SpatialConfig | None = None) -> None:
        self.ladder = ladder
        self.config = config or SpatialConfig()
        self.pressure = 0.0  # B_hat
        self._started = False
        self._gamma = self.config.gamma
        self._inv_sat = 1.0 / self.config.b_sat
        self._delta = self.config.delta_step
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
        new, i = lad.snap(target), self._level
        # entering co-running, or the snapped level moved by at least Delta_step levels: apply
        if i is None or abs(new - i) >= self._delta:
            i = new
        self._level = i
        self.cap = lad.levels[i]
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
