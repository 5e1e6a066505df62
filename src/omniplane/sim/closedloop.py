"""A closed-loop client for the simulator: ``vllm bench serve --max-concurrency C --num-prompts N``.

At time 0, ``C`` requests arrive. Whenever one finishes (or is refused), the next of the ``N``
arrives at once, so at most ``C`` are in flight. Request ``i`` takes the type and work of
``templates[i % len(templates)]``. Everything else is the open-loop simulator's
(:class:`omniplane.sim.simulator.Simulation`): the same topology, engines and records. Mean
TTFT, TPOT and E2EL, as the benchmark reports them, come from :func:`bench_metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from omniplane.sim.eventloop import ARRIVE, EventLoop
from omniplane.sim.job import Job
from omniplane.sim.metrics import SimResult
from omniplane.sim.simulator import Simulation
from omniplane.sim.topology import Topology
from omniplane.spec import ModelSpec
from omniplane.workload.request import Request


class ClosedLoopSimulation(Simulation):
    """The simulator fed by ``concurrency`` clients that each send their next request when the
    last one ends, ``num_prompts`` requests in all (see the module doc)."""

    def __init__(self, model: ModelSpec, topology: Topology, templates: Sequence[Any], *,
                 loop: EventLoop, concurrency: int, num_prompts: int, seed: int = 0,
                 slo_s: Mapping[str, float] | None = None) -> None:
        if concurrency < 1:
            raise ValueError(f"ClosedLoopSimulation: concurrency must be >= 1, got {concurrency}")
        if num_prompts < 1:
            raise ValueError(f"ClosedLoopSimulation: num_prompts must be >= 1, got {num_prompts}")
        if not templates:
            raise ValueError("ClosedLoopSimulation: templates: expected at least one request")
        for i, t in enumerate(templates):
            if t.type not in model.type_names:
                raise ValueError(f"ClosedLoopSimulation: templates[{i}].type {t.type!r} is not a request "
                                 f"type of model {model.name!r} ({', '.join(model.type_names)})")
        super().__init__(model, topology, [], loop=loop, seed=seed, slo_s=slo_s)
        self._templates = list(templates)
        self.concurrency = concurrency
        self.num_prompts = num_prompts
        self._issued: list[Request] = []
        self._source = self._issued

    def start(self) -> None:
        self.loop.at(0.0, self._fill, None, ARRIVE)

    def _fill(self, _: Any = None) -> None:
        while len(self._issued) < self.num_prompts and self.in_flight < self.concurrency:
            i = len(self._issued)
            tpl = self._templates[i % len(self._templates)]
            self._issued.append(Request(i, self.loop.now, tpl.type, tpl.work))
            self._arrive(i)

    def done(self, job: Job, now: float) -> None:
        before = self.completed
        super().done(job, now)
        if self.completed > before:
            self._fill()

    def failed(self, job: Job, now: float, reason: str) -> None:
        before = self.completed
        super().failed(job, now, reason)
        if self.completed > before:
            self._fill()


def bench_metrics(result: SimResult, llm: str, output_tokens: int) -> dict[str, float]:
    """Mean TTFT (arrival to ``llm``'s first token), TPOT ((E2EL - TTFT) / (output_tokens - 1))
    and E2EL (arrival to the request's end) over the completed requests, in milliseconds, as
    ``vllm bench serve`` reports them."""
    r = result.requests
    ok = ~r.failed & ~np.isnan(r.finish)
    if llm not in r.first_out:
        raise ValueError(f"bench_metrics: {llm!r} is not a component of the run ({', '.join(r.first_out)})")
    if not ok.any():
        return {"mean_ttft_ms": math.nan, "mean_tpot_ms": math.nan, "mean_e2el_ms": math.nan, "completed": 0}
    ttft = float(np.mean(r.first_out[llm][ok] - r.arrival[ok]))
    e2el = float(np.mean(r.finish[ok] - r.arrival[ok]))
    tpot = (e2el - ttft) / (output_tokens - 1) if output_tokens > 1 else 0.0
    return {"mean_ttft_ms": 1e3 * ttft, "mean_tpot_ms": 1e3 * tpot, "mean_e2el_ms": 1e3 * e2el,
            "completed": int(ok.sum())}
