"""Checking the simulator against queueing theory (M/M/1, M/D/1, M/M/c).

The queue is built from the same parts as every simulation: a one-component model (a
stand-alone vocoder whose service time equals its request's ``audio_seconds``), a node with
``c`` batch-size-1 executors sharing one FCFS queue, Poisson arrivals, and the ordinary
``Simulation`` loop. Waiting time = first response - arrival - own service time.

Closed forms (rate lambda, service rate mu, rho = lambda / (c mu)):
M/M/1  Wq = rho / (mu - lambda)
M/D/1  Wq = rho / (2 mu (1 - rho))               (Pollaczek-Khinchine with zero service variance)
M/M/c  Wq = C(c, a) / (c mu - lambda), a = lambda / mu, C = Erlang C probability of waiting
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

from omniplane.sim.build import build_topology
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.simulator import Simulation
from omniplane.spec import ModelSpec, PlanSpec, load_gpus, parse
from omniplane.spec.workload import Poisson
from omniplane.workload import Request, arrival_times

QueueKind = Literal["mm1", "md1", "mmc"]


def queue_model(service: Literal["exponential", "constant"]) -> ModelSpec:
    dist: dict[str, Any] = ({"dist": "exponential", "mean": 1.0} if service == "exponential"
                            else {"dist": "constant", "value": 1.0})
    return parse(ModelSpec, {
        "kind": "model",
        "name": "queue",
        "components": [{"name": "server", "kind": "generator", "generator": "vocoder",
                        "size": {"params": 1.0, "source": "assumption: a queueing-check server"}}],
        "request_types": [{"name": "job", "inputs": ["text"], "output": "audio",
                           "path": ["server"], "work": {"server": {"audio_seconds": dist}},
                           "source": "assumption: service time = audio_seconds"}],
        "executor_types": [{"name": "server", "hosts": ["server"], "max_batch": [1]}],
    })


class ServiceTimeCost:
    """Cost source for the queueing check: a vocoder step takes its audio seconds."""

    def vocoder_time(self, component: str, cfg: Any, batch: int, audio_seconds: float) -> float:
        return audio_seconds

    def kv_capacity_tokens(self, components: Sequence[str], cfg: Any) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the queueing check has no cost for {name}")


def closed_form_wait(kind: QueueKind, rho: float, servers: int = 1, mu: float = 1.0) -> float:
    if not 0 < rho < 1:
        raise ValueError(f"rho must be in (0, 1), got {rho}")
    if kind == "mm1":
        lam = rho * mu
        return rho / (mu - lam)
    if kind == "md1":
        return rho / (2 * mu * (1 - rho))
    c = servers
    lam = rho * c * mu
    a = lam / mu
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / math.factorial(c) / (1 - rho)
    erlang_c = tail / (head + tail)
    return erlang_c / (c * mu - lam)


def simulate_waits(kind: QueueKind, rho: float, customers: int, seed: int, servers: int = 1,
                   warmup: float = 0.1) -> tuple[float, int, float]:
    """One replication: mean waiting time after discarding the first ``warmup`` fraction,
    events processed and wall seconds."""
    c = servers if kind == "mmc" else 1
    model = queue_model("constant" if kind == "md1" else "exponential")
    rng = np.random.default_rng(seed)
    times = arrival_times(Poisson(process="poisson", rate=rho * c), rng, n=customers)
    service = np.ones(customers) if kind == "md1" else rng.exponential(1.0, customers)
    arrivals = [Request(i, float(t), "job", {"server": {"audio_seconds": float(s)}})
                for i, (t, s) in enumerate(zip(times, service, strict=True))]
    loop = EventLoop()
    plan = queue_plan(c)
    topo = build_topology(model, plan, load_gpus().get(plan.gpu), ServiceTimeCost(), loop)
    result = Simulation(model, topo, arrivals, seed=seed, loop=loop).run()
    skip = int(customers * warmup)
    wait = result.requests.latency()[skip:] - service[skip:]
    return float(wait[~np.isnan(wait)].mean()), result.events, result.wall_s


def queue_plan(servers: int) -> PlanSpec:
    """``servers`` batch-size-1 executors of the queue model sharing one FCFS queue (the GPU
    kind is a placeholder: the queue's cost source ignores it)."""
    return parse(PlanSpec, {
        "kind": "plan", "model": "queue", "gpu": "A100-80GB", "transfer_ms": 0,
        "nodes": [{"name": "server", "components": ["server"],
                   "executors": [{"count": servers, "tp": 1, "max_batch": 1}]}],
        "routes": {"job": [{"nodes": ["server"], "p": 1.0}]},
    })


@dataclass(frozen=True)
class QueueCheck:
    kind: QueueKind
    rho: float
    servers: int
    customers: int  # per replication
    replications: int
    simulated_wait: float  # mean over replications
    half_width: float  # 95% confidence half-width (Student t over replications)
    closed_form_wait: float
    events: int
    wall_s: float

    @property
    def contains_closed_form(self) -> bool:
        return abs(self.simulated_wait - self.closed_form_wait) <= self.half_width

    @property
    def relative_half_width(self) -> float:
        return self.half_width / self.closed_form_wait

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "rho": self.rho, "servers": self.servers,
            "customers_per_replication": self.customers, "replications": self.replications,
            "customers": self.customers * self.replications,
            "simulated_mean_wait": self.simulated_wait, "ci95_half_width": self.half_width,
            "ci95": [self.simulated_wait - self.half_width, self.simulated_wait + self.half_width],
            "closed_form_mean_wait": self.closed_form_wait,
            "relative_half_width": self.relative_half_width,
            "contains_closed_form": self.contains_closed_form,
            "events": self.events, "wall_s": self.wall_s,
            "events_per_s": self.events / self.wall_s if self.wall_s > 0 else None,
            "customers_per_s": self.customers * self.replications / self.wall_s if self.wall_s > 0 else None,
        }


def check_queue(kind: QueueKind, rho: float, *, servers: int = 1, customers: int = 200_000,
                replications: int = 10, seed: int = 0,
                progress: Callable[[], None] | None = None) -> QueueCheck:
    """Independent replications (seeds ``seed .. seed+R-1``) and a Student-t 95% interval;
    ``progress`` is called after each replication."""
    if replications < 2:
        raise ValueError("need at least 2 replications for a confidence interval")
    waits, events, wall = [], 0, 0.0
    for r in range(replications):
        w, ev, t = simulate_waits(kind, rho, customers, seed + r, servers)
        waits.append(w)
        events += ev
        wall += t
        if progress is not None:
            progress()
    arr = np.asarray(waits)
    half = float(stats.t.ppf(0.975, replications - 1) * arr.std(ddof=1) / np.sqrt(replications))
    c = servers if kind == "mmc" else 1
    return QueueCheck(kind, rho, c, customers, replications, float(arr.mean()), half,
                      closed_form_wait(kind, rho, c), events, wall)
