"""Step prices kept across runs (``RunSetup(prices=PriceBook(cost))``, what the planner's many
runs share) give exactly the results of runs that price every step afresh."""

from __future__ import annotations

from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.sim import RunSetup, simulate
from omniplane.sim.costs import PriceBook
from omniplane.spec import GPUKind, ModelSpec, load_gpus, load_model, load_plan, load_workload
from omniplane.spec.catalog import catalog_dir
from omniplane.workload import generate


def _fingerprint(res: object) -> dict[str, object]:
    d = res.to_json()  # type: ignore[attr-defined]
    for k in ("wall_s", "events_per_s"):
        d.pop(k)
    d["first_response"] = [float(x) if x == x else None for x in res.requests.first_response]  # type: ignore[attr-defined]
    return d  # type: ignore[no-any-return]


def test_shared_prices_change_no_result() -> None:
    plan = load_plan(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
    wl = load_workload(catalog_dir() / "workloads" / "qwen3-omni-servegen.yaml")
    base = generate(wl, n=300, rate=1.0, seed=3)
    cost = CostModel(plan.model)
    book = PriceBook(cost)
    slo = {t: 0.8 for t in plan.model.type_names}
    for rate in (2.0, 6.0, 2.0):  # the second 2.0 runs on prices the first two left
        reqs = [type(r)(r.id, r.arrival / rate, r.type, r.work, r.meta) for r in base]
        fresh = simulate(plan, reqs, CostModel(plan.model), slo_s=slo)
        shared = simulate(plan, reqs, cost, slo_s=slo, setup=RunSetup(prices=book))
        assert _fingerprint(shared) == _fingerprint(fresh)
    assert sum(len(t) for t in book._tables.values()) > 0  # the book was used
    other = PriceBook(CostModel(plan.model))  # a book of another cost source is not used
    simulate(plan, base[:50], cost, setup=RunSetup(prices=other))
    assert not other._tables and not other._kv


@cache
def _specs() -> tuple[ModelSpec, GPUKind]:
    """The model and GPU specs (frozen), parsed once rather than for each of 200 examples."""
    return load_model("qwen3-omni"), load_gpus().get("A100-80GB")


@settings(max_examples=200, deadline=None)
@given(pt=st.integers(0, 9000), pc=st.integers(0, 60000), pr=st.integers(1, 64), db=st.integers(0, 256),
       dc=st.integers(0, 500000), tp=st.sampled_from([1, 2, 4]))
def test_the_positional_iteration_price_is_the_keyword_one(pt: int, pc: int, pr: int, db: int, dc: int,
                                                           tp: int) -> None:
    """What the LLM engine calls each iteration (``llm_iteration_fn``) is ``llm_iteration_time``."""
    model, gpu = _specs()  # read once: the cost model is built afresh for every example
    cost = CostModel(model)
    cfg = ExecutorConfig(gpu=gpu, tp=tp, max_batch=64)
    for comp in ("thinker", "talker"):
        fn = cost.llm_iteration_fn(comp, cfg)
        assert fn(pt, pc, pr, db, dc) == cost.llm_iteration_time(
            comp, cfg, prefill_tokens=pt, prefill_context=pc, prefill_requests=pr, decode_batch=db,
            decode_context=dc)
