"""Step prices kept across runs (``RunSetup(prices=PriceBook(cost))``, what the planner's many
runs share) give exactly the results of runs that price every step afresh."""

from __future__ import annotations

from omniplane.perf import CostModel
from omniplane.sim import RunSetup, simulate
from omniplane.sim.costs import PriceBook
from omniplane.spec import load_plan, load_workload
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
