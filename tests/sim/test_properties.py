"""Invariants over random model graphs, plans and workloads (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniplane.sim.simulator import Simulation
from omniplane.spec import ModelSpec, parse
from tests.sim.fakes import LinearCost
from tests.sim.helpers import make_sim, poisson_arrivals
from tests.spec.test_roundtrip import model_docs


@st.composite
def plans_for(draw: st.DrawFn, model_doc: dict[str, Any]) -> dict[str, Any]:
    """Merge a random subset of colocatable edges into nodes; 1-3 executor groups per node."""
    model = parse(ModelSpec, model_doc)
    parent = {c: c for c in model.by_name}

    def find(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b, ok in model.edges:
        if ok and draw(st.booleans()):
            parent[find(a)] = find(b)
    groups: dict[str, list[str]] = {}
    for c in model.by_name:
        groups.setdefault(find(c), []).append(c)
    nodes = []
    for i, comps in enumerate(groups.values()):
        et = model.executor_type_for(comps)
        assert et is not None
        execs = [{"count": draw(st.integers(1, 3)), "tp": draw(st.sampled_from(et.tp)),
                  "max_batch": draw(st.sampled_from(et.max_batch))}
                 for _ in range(draw(st.integers(1, 2)))]
        nodes.append({"name": f"n{i}", "components": comps, "executors": execs})
    routes = {}
    for t in model.type_names:
        path = set(model.request_type(t).path)
        routes[t] = [{"nodes": [n["name"] for n in nodes if set(n["components"]) & path], "p": 1.0}]
    return {"kind": "plan", "model": "m.yaml", "gpu": "H100-SXM", "nodes": nodes, "routes": routes,
            "transfer_ms": draw(st.sampled_from([0.0, 5.0]))}


def _lower_bounds(sim: Simulation, cost: LinearCost, req: Any) -> tuple[float, float]:
    """Solo critical path (no queueing, batch 1, no transfers): (first response, finish)."""
    first: dict[str, float] = {}
    done: dict[str, float] = {}
    for c in req.path.components:
        start = 0.0
        for p in req.path.preds[c]:
            streaming = dict(req.path.succs[p])[c]
            start = max(start, first[p] if streaming else done[p])
        w = req.work[c]
        kind = sim.model.component(c)
        if kind.is_llm:
            prompt, out = int(w["prompt_tokens"]), int(w["output_tokens"])
            feeder = req.path.feed_of.get(c)
            if feeder is not None and sim.model.component(feeder).is_llm:  # only its first token exists
                prompt = max(1, prompt - (int(req.work[feeder]["output_tokens"]) - 1))
            prefill = cost.step_s + cost.prefill_s * prompt
            first[c] = start + prefill
            done[c] = first[c] + sum(cost.step_s + cost.decode_s + cost.context_s * (prompt + g)
                                     for g in range(1, max(out, 1)))
        elif kind.kind.value == "encoder":
            first[c] = done[c] = start + 0.002 + cost.encode_s * w["tokens"]
        elif kind.generator is not None and kind.generator.value == "dit":
            first[c] = done[c] = start + w["steps"] * (0.01 + cost.dit_s * w["tokens"])
        elif kind.generator is not None and kind.generator.value == "vae":
            first[c] = done[c] = start + 0.005 + cost.vae_s * w["pixels"]
        else:
            first[c] = start + 0.001 + cost.vocode_s * min(w["audio_seconds"], 0.08)
            done[c] = first[c]
    sink = req.path.sink
    metric = req.path.metric.value
    return (done[sink] if metric == "e2e" else first[sink]), max(done.values())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(data=st.data(), rate=st.floats(5, 200), n=st.integers(20, 80), seed=st.integers(0, 10**6))
def test_conservation_paths_and_causality(data: st.DataObject, rate: float, n: int, seed: int) -> None:
    model_doc = data.draw(model_docs())
    plan_doc = data.draw(plans_for(model_doc))
    types = [t["name"] for t in model_doc["request_types"]]
    mix = {t: 1 / len(types) for t in types}
    arrivals = poisson_arrivals(model_doc, mix, rate, n, seed)
    cost = LinearCost(kv_tokens=data.draw(st.sampled_from([3000, 10**7])))
    sim = make_sim(model_doc, plan_doc, arrivals, cost, seed=seed)
    # arrivals = completed + in flight at every checkpoint
    horizon = arrivals[-1].arrival * 3 + 1
    sim.start()
    for k in range(1, 11):
        sim.loop.run(until=horizon * k / 10)
        assert len(sim.requests) == sim.completed + sim.in_flight
    sim.loop.run()
    assert sim.completed == n and sim.in_flight == 0
    for r in sim.requests:
        if r.failed:  # refused (longer than the KV cache): leaves with an error, never lost
            assert "KV capacity" in r.failed and r.finish is not None
            continue
        assert set(r.done) == set(r.path.components)  # visited exactly its type's path
        assert r.finish is not None and r.first_response is not None
        assert r.arrival <= r.first_response <= r.finish
        lb_first, lb_finish = _lower_bounds(sim, cost, r)
        assert r.first_response - r.arrival >= lb_first - 1e-9
        assert r.finish - r.arrival >= lb_finish - 1e-9
