"""The simulator's closed-loop client (``vllm bench serve --max-concurrency``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.perf.replay import closed_loop
from omniplane.sim.build import RunSetup, build_topology
from omniplane.sim.closedloop import ClosedLoopSimulation, bench_metrics
from omniplane.sim.eventloop import EventLoop
from omniplane.spec import ModelSpec, PlanSpec, load_gpus, parse
from tests.sim.fakes import Arrival
from tests.spec.builders import tiny_model, tiny_plan

PROMPT, OUT = 600, 40


def _sim(concurrency: int, num_prompts: int, runtime: str = "vllm-v1") -> tuple[Any, ModelSpec, CostModel]:
    model = parse(ModelSpec, tiny_model())
    doc = tiny_plan()
    doc["nodes"] = [{"name": "front", "components": ["thinker"],
                     "executors": [{"count": 1, "tp": 1, "max_batch": 32}]},
                    {"name": "rest", "components": ["enc", "talker", "voc"],
                     "executors": [{"count": 1, "tp": 1, "max_batch": 16}]}]
    doc["routes"] = {"t2t": [{"nodes": ["front"], "p": 1.0}], "i2a": [{"nodes": ["rest", "front", "rest"],
                                                                      "p": 1.0}]}
    plan = parse(PlanSpec, doc)
    gpu = load_gpus().get("H100-SXM")
    cost = CostModel(model, runtime=runtime)
    loop = EventLoop()
    topo = build_topology(model, plan, gpu, cost, loop, RunSetup(cpu_seconds=lambda c: 0.0))
    work = {"thinker": {"prompt_tokens": PROMPT, "output_tokens": OUT}}
    sim = ClosedLoopSimulation(model, topo, [Arrival(0, 0.0, "t2t", work)], loop=loop,
                               concurrency=concurrency, num_prompts=num_prompts)
    return sim, model, cost


@pytest.mark.parametrize("concurrency", [1, 3, 8])
def test_never_more_than_the_concurrency_in_flight_and_every_prompt_is_sent(concurrency: int) -> None:
    sim, _, _ = _sim(concurrency, 4 * concurrency)
    res = sim.run()
    r = res.requests
    assert len(r) == 4 * concurrency and res.completed == 4 * concurrency and not r.failed.any()
    events = sorted([(t, 1) for t in r.arrival] + [(t, -1) for t in r.finish], key=lambda e: (e[0], e[1]))
    live = np.cumsum([d for _, d in events])
    assert live.max() == concurrency
    # the first wave arrives at once; every later arrival is some request's finish
    assert (r.arrival == 0.0).sum() == concurrency
    finishes = set(r.finish.tolist())
    assert all(a in finishes for a in r.arrival if a > 0.0)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_agrees_with_the_cost_models_own_replay_on_one_executor(concurrency: int) -> None:
    sim, _, cost = _sim(concurrency, 4 * concurrency)
    got = bench_metrics(sim.run(), "thinker", OUT)
    ref = closed_loop(cost, "thinker", ExecutorConfig(load_gpus().get("H100-SXM"), 1, 32), input_len=PROMPT,
                      output_len=OUT, concurrency=concurrency, num_prompts=4 * concurrency).to_json()
    for k in ("mean_ttft_ms", "mean_e2el_ms", "mean_tpot_ms"):
        assert got[k] == pytest.approx(ref[k], rel=0.01), k


def test_bad_client_settings_are_refused_by_name() -> None:
    sim, model, _ = _sim(1, 1)
    for kwargs, word in (({"concurrency": 0, "num_prompts": 1}, "concurrency"),
                         ({"concurrency": 1, "num_prompts": 0}, "num_prompts")):
        with pytest.raises(ValueError, match=word):
            ClosedLoopSimulation(model, sim.topo, [Arrival(0, 0.0, "t2t", {})], loop=EventLoop(), **kwargs)
    with pytest.raises(ValueError, match="not a request type"):
        ClosedLoopSimulation(model, sim.topo, [Arrival(0, 0.0, "x2y", {})], loop=EventLoop(),
                             concurrency=1, num_prompts=1)
