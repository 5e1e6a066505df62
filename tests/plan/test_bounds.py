"""The search's bounds are admissible: no physical plan's flow rate, estimated goodput or
simulated goodput exceeds the bound of its logical plan (docs/guides/plan.md, "Search")."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.plan.bounds import grid_bound
from omniplane.plan.costs import NodeCosts
from omniplane.plan.emit import to_spec
from omniplane.plan.flow import Expansion, exhaustive, top_rate
from omniplane.plan.logical import Subplan, compose
from omniplane.plan.montecarlo import evaluate
from omniplane.plan.options import PlannerOptions
from omniplane.plan.order import LogicalOrder
from omniplane.plan.pipeline import Planner
from omniplane.plan.routing import routing_vectors
from omniplane.plan.select import bound_factor
from omniplane.plan.space import FULL
from omniplane.slo.resolve import target_array
from tests.plan.conftest import problem
from tests.plan.test_flow import FakeTable

node_spec = st.lists(st.tuples(st.floats(0.01, 2.0), st.sampled_from([1, 1, 2])), min_size=1, max_size=3)


def _instance(nodes: list[list[tuple[float, int]]]) -> tuple[FakeTable, object]:
    costs = []
    for i, opts in enumerate(nodes):
        tps = np.array([tp for _, tp in opts])
        s_full = np.array([[c] for c, _ in opts])
        costs.append(NodeCosts((f"c{i}",), tuple((tp, 8) for _, tp in opts), (), tps, s_full))
    keys = tuple(frozenset([f"c{i}"]) for i in range(len(nodes)))
    sp = Subplan(keys, (((tuple(range(len(keys))), 0),),), 1)
    return FakeTable(costs), compose((sp,), 1)


@settings(max_examples=50, deadline=None)
@given(st.lists(node_spec, min_size=1, max_size=3), st.integers(1, 9), st.floats(0.0, 1.0))
def test_rows_are_exactly_the_config_vectors_that_reach_the_threshold(  # type: ignore[no-untyped-def]
        nodes, budget, frac) -> None:
    table, lp = _instance(nodes)
    allowed = [np.arange(len(o)) for o in nodes]
    exp = Expansion(lp, table, np.ones((1, 1, 1)), np.ones(1), budget, allowed)  # type: ignore[arg-type]
    tops = {}
    for opt in itertools.product(*allowed):
        tp = np.array([[nodes[n][o][1] for n, o in enumerate(opt)]])
        load = np.array([[[nodes[n][o][0] for n, o in enumerate(opt)]]])
        tops[opt] = float(top_rate(tp, load, budget)[0, 0])
    best = max(tops.values())
    # the bound is the best flow rate of any config and count vector (up to bisection)
    bound = float(grid_bound(exp.loads, exp.tps, budget)[0])
    assert bound >= best * (1 - 1e-12)
    assert bound <= best * (1 + 1e-3) + 1e-9 or best == 0
    thr = frac * best
    opt, _, top, _ = exp.rows(thr)
    got = {tuple(int(x) for x in row): float(t) for row, t in zip(opt, top, strict=True)}
    want = {k: v for k, v in tops.items() if v > 0 and v >= thr}
    assert set(got) == set(want)
    for k, v in want.items():
        assert abs(got[k] - v) <= 1e-9 * max(1.0, v)


@pytest.mark.slow
@pytest.mark.parametrize("gpus", [2, 3, 5])
def test_no_plan_beats_the_bound_of_its_logical_plan(gpus: int) -> None:
    """Every physical plan of every logical plan of a small model (redundant ones included):
    R_d <= the queue's bound (the smaller of the loose and the tightened one), the estimate
    <= the goodput bound, and for a sample of plans the simulated goodput <= the goodput
    bound."""
    pb = problem("tiny", gpus)
    opts = PlannerOptions(mc_samples=32, sim_requests=200)
    planner = Planner(pb, options=opts)
    order = LogicalOrder(planner.table, FULL, pb.pi(), gpus, opts.k_c, opts.k_s, opts.grid_steps)
    pi = pb.pi()
    per_type = planner.simulator.arrival_factor()
    factor = max(1.0, bound_factor("total", np.array([per_type[t] for t in pb.types]), pi)) * opts.alpha
    rng = np.random.default_rng(gpus)
    checked = simulated = 0
    for i, j, loose in zip(order.i.tolist(), order.j.tolist(), order.ub.tolist(), strict=True):
        lp = order.plan(i, j)
        vecs = routing_vectors(lp, opts.grid_steps, opts.max_routings)
        allowed = [np.arange(len(planner.table.node(n).options)) for n in lp.nodes]
        exp = Expansion(lp, planner.table, vecs, pi, gpus, allowed)
        bound = min(loose, exp.bound())  # what the queue uses
        cands = exhaustive(lp, planner.table, vecs, pi, gpus)
        if not len(cands):
            continue
        assert cands.rate.max() <= bound * (1 + 1e-9)
        slo = target_array(planner.targets, pb.types)
        good, _ = evaluate(cands, planner.table, pi, slo, opts.alpha, 0.010)
        assert (good.sum(axis=1) <= factor * cands.rate + 1e-9).all()
        checked += len(cands)
        for k in rng.choice(len(cands), size=min(2, len(cands)), replace=False):
            spec = to_spec(cands, int(k), pb.model, pb.gpu.name, gpus, 10.0)
            out = planner.simulator.run(spec, opts.alpha * float(cands.rate[k]))
            assert out.goodput.sum() <= factor * float(cands.rate[k]) * (1 + 1e-9)
            simulated += 1
    assert checked > 50 and simulated > 5
