"""Executor-level routing (Cornfigurator 4.2): a node split into two executor groups, each type
routed between them independently of its route."""

from __future__ import annotations

import numpy as np

from omniplane.plan.emit import to_spec
from omniplane.plan.enumerate import simple_subplans
from omniplane.plan.logical import compose
from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner, SimOracle
from omniplane.plan.routing import group_vectors, node_share, routing_vectors
from omniplane.plan.search import Search
from omniplane.plan.select import selection_policy
from omniplane.plan.space import FULL
from omniplane.slo.resolve import target_array
from omniplane.spec import ModelSpec, load_gpus, parse, resolve_plan
from tests.plan.conftest import problem, table, targets
from tests.spec.builders import tiny_model


def test_a_second_group_doubles_the_routes_through_its_node_and_keeps_each_types_share() -> None:
    model = parse(ModelSpec, tiny_model())
    simple = simple_subplans(model)
    lp = compose((simple[0],), len(model.type_names))
    base = routing_vectors(lp, 4, 121)[0]
    n = 0
    lp2, origin = lp.with_group(n)
    assert len(lp2.nodes) == len(lp.nodes) + 1 and lp2.nodes[-1] == lp.nodes[n]
    assert lp2.group_of[-1] == n and all(g < 0 for g in lp2.group_of[:-1])
    for t, rs in enumerate(lp.routes):
        through = sum(n in r for r in rs)
        assert len(lp2.routes[t]) == len(rs) + through
    classes = [0 if any(n in r for r in rs) else -1 for rs in lp.routes]
    vecs = group_vectors(base, origin, classes, 4)
    assert len(vecs) == 5  # one class through the node, five splits on a grid of 4
    share = node_share(lp2, vecs)  # [V, m + 1, T]
    old = node_share(lp, base[None])[0]
    for v in range(len(vecs)):
        assert np.allclose(vecs[v].sum(axis=1), base.sum(axis=1))  # probability conserved per type
        assert np.allclose(share[v, n] + share[v, -1], old[n])  # the node's load split, not changed
        others = [k for k in range(len(lp.nodes)) if k != n]
        assert np.allclose(share[v, others], old[others])


def test_grouped_plans_emit_one_node_with_two_executor_groups_and_simulate() -> None:
    pb = problem("tiny", 6)
    tab = table("tiny")
    opts = PlannerOptions(k_c=1, k_s=1, mc_samples=32, sim_requests=60, max_simulated=2, mc_tolerance=0.2)
    planner = Planner(pb, options=opts, table=tab, targets=targets("tiny"))
    found = Search(pb, tab, FULL, opts, target_array(targets("tiny"), pb.types), 0.010,
                   selection_policy("total"), SimOracle(planner, FULL)).run()
    assert found.stats.grouped >= 1
    grouped = [b for b in found.pool if b.cands.lp.group_of]
    assert grouped, "no plan with two executor groups survived the Monte Carlo phase"
    cands = grouped[0].cands
    spec = to_spec(cands, 0, pb.model, pb.gpu.name, 6, 10.0)
    resolve_plan(spec, pb.model, load_gpus())
    two = [nd for nd in spec.nodes if len(nd.executors) == 2]
    assert len(two) == 1 and len(spec.nodes) == len(cands.costs) - 1
    node = two[0]
    assert node.routing  # per type, a probability per group
    for t, probs in node.routing.items():
        assert len(probs) == 2 and abs(sum(probs) - 1) < 1e-6
        assert any(node.name in r.nodes for r in spec.routes[t])
    out = planner.simulator.run(spec, opts.alpha * float(cands.rate[0]))
    assert float(out.goodput.sum()) > 0
