"""Build simulations from spec dicts with the fake cost source."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from omniplane.sim.build import RunSetup, build_topology
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.simulator import Simulation
from omniplane.spec import ModelSpec, PlanSpec, load_gpus, parse, resolve_plan
from omniplane.spec.work import sample_work
from tests.sim.fakes import Arrival, LinearCost, fake_cfg


def make_sim(model_doc: dict[str, Any], plan_doc: dict[str, Any], arrivals: Sequence[Arrival],
             cost: LinearCost | None = None, seed: int = 0, trace: bool = False,
             slo_s: dict[str, float] | None = None) -> Simulation:
    model = parse(ModelSpec, model_doc)
    plan = resolve_plan(parse(PlanSpec, plan_doc), model, load_gpus())
    loop = EventLoop()
    setup = RunSetup(make_cfg=fake_cfg, trace=trace, cpu_seconds=lambda c: 0.0)
    topo = build_topology(model, plan.spec, plan.gpu, cost or LinearCost(), loop, setup)
    return Simulation(model, topo, arrivals, seed=seed, loop=loop, slo_s=slo_s)


def poisson_arrivals(model_doc: dict[str, Any], mix: dict[str, float], rate: float, n: int,
                     seed: int) -> list[Arrival]:
    model = parse(ModelSpec, model_doc)
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1 / rate, n))
    types = rng.choice(list(mix), size=n, p=list(mix.values()))
    out = []
    for i, (t, ty) in enumerate(zip(times, types, strict=True)):
        work = sample_work(model, str(ty), rng, 1)[0]
        out.append(Arrival(i, float(t), str(ty), work))
    return out
