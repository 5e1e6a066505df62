"""The request profiler (HorizonServe section 4.2): class, path, deadline, remaining slack.

For request ``i`` of class ``c(i)`` arriving at ``a_i``:

    d_i      = a_i + Delta_c                       first-response deadline (Delta_c: SLO table)
    r_hat(t) = prefill left + decode left + downstream estimate   (offline profile - progress)
    u_i(t)   = (d_i - t) / r_hat_i(t)              remaining-slack ratio
    protected  <=>  u_i(t) < u_guard

``r_hat`` is a coarse estimate, not an oracle (section 4.2): it reads the prompt length (known at
admission) and the shared-stage progress counters (prompt tokens prefilled, tokens generated),
and takes everything else from the class's offline profile (:class:`ClassProfile`): the
per-token prefill and decode cost of the shared stage, how many shared-stage tokens precede the
first response, and the downstream stages' time to first output. It never reads the request's
actual output length.

While a request waits, its progress is frozen, so its ``r_hat`` is constant and the time at
which it becomes protected is fixed: ``protect_at = d - u_guard x r_hat`` (``u < u_guard``
exactly when ``t > protect_at``). The temporal scheduler uses that to refresh protected bits in
O(1) amortised per step instead of recomputing ``u`` for every waiting request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from omniplane.policy import PathClass, SeqInfo


@dataclass(frozen=True, slots=True)
class ClassProfile:
    """Offline profile of one request class (section 4.2, "offline preprocessing").

    ``prefill_s_per_token`` and ``step_s`` give the shared stage's prefill time for a prompt;
    ``decode_s_per_token`` its decode step; ``decode_tokens`` how many shared-stage tokens must
    be generated before the first response can happen (0 when the first response is the shared
    stage's first token, TTFT); ``downstream_s`` the downstream stages' time from the shared
    stage's hand-over to the first response (0 for a short path).
    """

    name: str
    path: PathClass
    slo_s: float
    prefill_s_per_token: float
    step_s: float
    decode_s_per_token: float
    decode_tokens: float
    downstream_s: float

    def __post_init__(self) -> None:
        for field in ("slo_s", "prefill_s_per_token", "step_s", "decode_s_per_token",
                      "decode_tokens", "downstream_s"):
            value = getattr(self, field)
            if not value >= 0.0:
                raise ValueError(f"ClassProfile {self.name!r}: {field} must be >= 0, got {value}")
        if self.slo_s <= 0.0:
            raise ValueError(f"ClassProfile {self.name!r}: slo_s must be > 0, got {self.slo_s}")

    def remaining_s(self, prompt_tokens: int, computed_tokens: int, generated: int) -> float:
        """``r_hat``: estimated time to the first response given shared-stage progress."""
        left = prompt_tokens - computed_tokens
        prefill = self.step_s + left * self.prefill_s_per_token if left > 0 else 0.0
        first = 1 if prefill > 0.0 else 0  # a prefill ends by sampling the first token
        decode = max(0.0, self.decode_tokens - generated - first) * self.decode_s_per_token
        return prefill + decode + self.downstream_s


@dataclass(frozen=True)
class ProfilerConfig:
    """``u_guard``: protect a request when its slack ratio falls below it (section 4.2)."""

    u_guard: float = 1.5  # assumption: the paper gives no value; a guard band of 50% over r_hat

    def __post_init__(self) -> None:
        if not self.u_guard >= 1.0:
            raise ValueError(f"ProfilerConfig.u_guard must be >= 1 (u = 1 is the deadline), "
                             f"got {self.u_guard}")


@dataclass(slots=True)
class RequestSignals:
    """What the profiler publishes for one request: path, deadline, slack, protected bit.

    Read-only by convention: created once per request on the hot path, where a frozen
    dataclass's construction costs several times a plain one's (bench/bench_sched.py)."""

    rid: int
    cls: str
    path: PathClass
    deadline: float
    r_hat: float
    slack: float  # u at annotation time
    protected: bool
    protect_at: float  # while waiting, protected from this time on


class RequestProfiler:
    """Maps requests to classes and computes their deadlines and slack (section 4.2)."""

    def __init__(self, profiles: Mapping[str, ClassProfile], config: ProfilerConfig | None = None) -> None:
        if not profiles:
            raise ValueError("RequestProfiler needs at least one class profile")
        self.profiles = dict(profiles)
        self.config = config or ProfilerConfig()
        self._u_guard = self.config.u_guard

    def profile(self, cls: str) -> ClassProfile:
        p = self.profiles.get(cls)
        if p is None:
            raise KeyError(f"unknown request class {cls!r}; the SLO table has {sorted(self.profiles)}")
        return p

    def r_hat(self, info: SeqInfo) -> float:
        p = self.profile(info.type)
        return max(p.remaining_s(info.prompt_tokens, info.computed_tokens, info.generated), 1e-6)

    def slack(self, info: SeqInfo, now: float) -> float:
        """``u_i(t) = (d_i - t) / r_hat_i(t)``."""
        return (info.arrival + self.profile(info.type).slo_s - now) / self.r_hat(info)

    def annotate(self, info: SeqInfo, now: float) -> RequestSignals:
        p = self.profile(info.type)
        r_hat = max(p.remaining_s(info.prompt_tokens, info.computed_tokens, info.generated), 1e-6)
        deadline = info.arrival + p.slo_s
        u = (deadline - now) / r_hat
        return RequestSignals(info.rid, p.name, p.path, deadline, r_hat, u, u < self._u_guard,
                              deadline - self._u_guard * r_hat)
