"""The router's counters, in Prometheus' text exposition format (``GET /metrics``).

Per request type: arrivals, how each request was answered (``outcome``), the first pick of a
deployment (``routed``: the plan's draw, before any retry) and every forward (``forwarded``),
retries, the first-response latency as a histogram (the time from the request's arrival to the
first bytes of the engine's answer: the first streamed event, or the whole answer when not
streamed), and attainment: of the answers the engine began, the share whose first response came
within the type's target (the routing file's ``slo_ms``). Per deployment: failures seen
(connection refused or dropped, 5xx), whether it is in rotation (``deployment_up``) and how often
it was ejected (:mod:`omniplane.deploy.gateway_health`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omniplane.deploy.gateway_health import Health

# histogram bounds, seconds: assumption, from 10 ms (a cached text token) to a minute (a long
# video's first audio)
BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
PREFIX = "omniplane_router_"
# how a request ended (one per request, the label of omniplane_router_responses_total)
OUTCOMES = (
    "ok",  # the engine answered 2xx, relayed whole
    "engine_status",  # the engine answered a non-2xx status, relayed unchanged
    "stream_error",  # the engine failed after its first bytes: an error event ended the stream
    "failed",  # no deployment answered (502), even after the retry
    "shed",  # over --max-in-flight (503 + Retry-After)
    "unavailable",  # every deployment serving the type is out of rotation (503 + Retry-After)
    "refused",  # bad request, no key, too large, body timeout (4xx before routing)
    "timeout",  # past --deadline-s (504, or an error event once streaming)
    "cancelled",  # the client left before the answer was complete
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class _Hist:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS_S))
    total: int = 0
    sum_s: float = 0.0

    def observe(self, seconds: float) -> None:
        self.total += 1
        self.sum_s += seconds
        for i, b in enumerate(BUCKETS_S):
            if seconds <= b:
                self.counts[i] += 1


class RouterMetrics:
    """Counters kept by the router; :meth:`render` writes them for Prometheus."""

    def __init__(self, types: list[str], targets_s: dict[str, float | None], deployments: list[str]) -> None:
        self.types = types
        self.targets_s = targets_s
        self.deployments = deployments
        self.arrivals: Counter[str] = Counter()
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.routed: Counter[tuple[str, str]] = Counter()
        self.forwarded: Counter[tuple[str, str]] = Counter()
        self.retries: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.first: dict[str, _Hist] = {t: _Hist() for t in types}
        self.met: Counter[str] = Counter()
        self.in_flight = 0
        self.health: Health | None = None

    def first_response(self, type_name: str, seconds: float) -> None:
        self.first.setdefault(type_name, _Hist()).observe(seconds)
        target = self.targets_s.get(type_name)
        if target is not None and seconds <= target:
            self.met[type_name] += 1

    def attainment(self, type_name: str) -> float | None:
        """Share of the type's first responses within its target (None: no target or none yet)."""
        h = self.first.get(type_name)
        if self.targets_s.get(type_name) is None or h is None or h.total == 0:
            return None
        return self.met[type_name] / h.total

    def render(self) -> str:
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            lines.extend([f"# HELP {PREFIX}{name} {help_text}", f"# TYPE {PREFIX}{name} {kind}"])

        def sample(name: str, labels: dict[str, str], value: float) -> None:
            text = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            lines.append(f"{PREFIX}{name}{{{text}}} {value:g}" if text else f"{PREFIX}{name} {value:g}")

        family("arrivals_total", "counter", "Requests that arrived, per request type.")
        for t in sorted(set(self.types) | set(self.arrivals)):
            sample("arrivals_total", {"type": t}, self.arrivals[t])
        family("responses_total", "counter", "Requests answered, per type and outcome.")
        for (t, o), n in sorted(self.outcomes.items()):
            sample("responses_total", {"type": t, "outcome": o}, n)
        family("routed_total", "counter", "First pick of a deployment per type (the plan's draw).")
        for (t, d), n in sorted(self.routed.items()):
            sample("routed_total", {"type": t, "deployment": d}, n)
        family("forwarded_total", "counter", "Requests sent to a deployment, retries included.")
        for (t, d), n in sorted(self.forwarded.items()):
            sample("forwarded_total", {"type": t, "deployment": d}, n)
        family("retries_total", "counter", "Requests retried on another deployment, per type.")
        for t in sorted(self.retries):
            sample("retries_total", {"type": t}, self.retries[t])
        family("deployment_failures_total", "counter",
               "A deployment that failed (refused, dropped, 5xx).")
        for d in sorted(set(self.deployments) | set(self.failures)):
            sample("deployment_failures_total", {"deployment": d}, self.failures[d])
        if self.health is not None:
            family("deployment_up", "gauge", "1: the deployment is drawn; 0: ejected after failing.")
            for d in sorted(self.deployments):
                sample("deployment_up", {"deployment": d}, int(self.health.up(d)))
            family("deployment_ejections_total", "counter", "Times the deployment was taken out of rotation.")
            for d in sorted(self.deployments):
                sample("deployment_ejections_total", {"deployment": d}, self.health.ejections[d])
        family("first_response_seconds", "histogram",
               "Arrival to the engine's first bytes (first event when streamed), per type.")
        for t, h in sorted(self.first.items()):
            for b, c in zip(BUCKETS_S, h.counts, strict=True):
                sample("first_response_seconds_bucket", {"type": t, "le": f"{b:g}"}, c)
            sample("first_response_seconds_bucket", {"type": t, "le": "+Inf"}, h.total)
            sample("first_response_seconds_sum", {"type": t}, h.sum_s)
            sample("first_response_seconds_count", {"type": t}, h.total)
        family("slo_target_seconds", "gauge", "The plan's first-response target per type.")
        for t, s in sorted(self.targets_s.items()):
            if s is not None:
                sample("slo_target_seconds", {"type": t}, s)
        family("slo_met_total", "counter", "First responses within the type's target.")
        for t in sorted(t for t, s in self.targets_s.items() if s is not None):
            sample("slo_met_total", {"type": t}, self.met[t])
        family("slo_attainment", "gauge", "Share of the type's first responses within its target.")
        for t in sorted(self.targets_s):
            a = self.attainment(t)
            if a is not None:
                sample("slo_attainment", {"type": t}, a)
        family("in_flight", "gauge", "Requests admitted and not yet answered.")
        sample("in_flight", {}, self.in_flight)
        return "\n".join(lines) + "\n"
