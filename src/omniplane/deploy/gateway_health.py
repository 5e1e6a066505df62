"""Which deployments the router may draw: passive ejection and an active probe that restores.

Small version of Envoy's outlier detection (consecutive failures eject a host for a base time
that grows with each ejection, up to a maximum) with an active health check to bring a host back,
as vLLM's router and llm-d's gateway do with the engine's ``/health``:

* a deployment that fails ``eject_after`` times in a row (refused or dropped connection, a 5xx
  before its first byte, a connection cut mid-answer) is ejected: not drawn for a cool-down of
  ``base_s * 2**(k-1)`` seconds (``k``: its ejections since its last good answer), at most
  ``max_s``;
* once the cool-down is over, its ``GET /health`` is probed every ``probe_interval_s``; the first
  HTTP 200 puts it back (a good answer resets ``k``; a deployment that answers its probe but fails
  its requests is ejected again, for twice as long);
* any good answer resets its count of consecutive failures.

Nothing here does I/O: the router (:mod:`omniplane.deploy.gateway`) runs the probes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# assumptions, not measured: Envoy's outlier detection defaults are 5 consecutive 5xx, a 30 s
# base ejection time and a 300 s maximum (envoyproxy/envoy, api/envoy/config/cluster/v3/
# outlier_detection.proto); the router retries each request once, so 3 failures are 2-3 requests.
EJECT_AFTER = 3
EJECT_BASE_S = 10.0
EJECT_MAX_S = 300.0
PROBE_INTERVAL_S = 2.0
PROBE_TIMEOUT_S = 2.0
HEALTH_PATH = "/health"  # vLLM's (and vLLM-Omni's) liveness endpoint: 200 when the engine is up


@dataclass(frozen=True)
class HealthOptions:
    """When a deployment is ejected and how it is probed (module docstring)."""

    eject_after: int = EJECT_AFTER
    base_s: float = EJECT_BASE_S
    max_s: float = EJECT_MAX_S
    probe_interval_s: float = PROBE_INTERVAL_S
    probe_timeout_s: float = PROBE_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.eject_after < 1:
            raise ValueError(f"eject_after: expected an integer >= 1, got {self.eject_after}")
        for name in ("base_s", "max_s", "probe_interval_s", "probe_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: expected a number > 0, got {getattr(self, name)}")
        if self.max_s < self.base_s:
            raise ValueError(f"max_s: expected at least base_s ({self.base_s:g}), got {self.max_s:g}")


@dataclass
class _State:
    failures: int = 0  # consecutive, since the last good answer
    streak: int = 0  # ejections since the last good answer (the back-off exponent)
    until: float | None = None  # ejected until this monotonic time, then probed; None: in rotation


@dataclass
class Health:
    """Per deployment: in rotation or ejected, and why."""

    deployments: list[str]
    options: HealthOptions = field(default_factory=HealthOptions)
    ejections: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._state = {d: _State() for d in self.deployments}

    def up(self, deployment: str) -> bool:
        """Whether ``deployment`` may be drawn."""
        return self._state[deployment].until is None

    def down(self) -> set[str]:
        return {d for d, s in self._state.items() if s.until is not None}

    def good(self, deployment: str) -> None:
        """``deployment`` answered: its failure count and back-off start over."""
        s = self._state[deployment]
        s.failures = s.streak = 0

    def failed(self, deployment: str, now: float) -> bool:
        """``deployment`` failed; True when this ejects it (the caller starts its probe)."""
        s = self._state[deployment]
        s.failures += 1
        if s.until is not None or s.failures < self.options.eject_after:
            return False
        s.streak += 1
        s.until = now + self.cool_down(s.streak)
        self.ejections[deployment] += 1
        return True

    def cool_down(self, streak: int) -> float:
        """The time out of rotation of the ``streak``-th ejection in a row."""
        o = self.options
        return float(min(o.max_s, o.base_s * 2.0 ** min(streak - 1, 62)))

    def probe_at(self, deployment: str) -> float | None:
        """When ``deployment``'s cool-down ends (None: it is in rotation)."""
        return self._state[deployment].until

    def restored(self, deployment: str) -> None:
        """Its probe answered 200: back in rotation (the back-off is kept until a good answer)."""
        s = self._state[deployment]
        s.until, s.failures = None, 0

    def retry_after(self, deployments: list[str], now: float) -> int:
        """Seconds until the first of ``deployments`` may be probed back (at least 1)."""
        ends = [u for d in deployments if (u := self._state[d].until) is not None]
        return max(1, int(min(ends, default=now) - now + 0.999))
