"""Monte Carlo latency: at zero load it is the solo latency the simulator agrees with."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.perf import ExecutorConfig
from omniplane.perf.solo import request_latency
from omniplane.plan.enumerate import subplan_of
from omniplane.plan.flow import Candidates
from omniplane.plan.logical import compose
from omniplane.plan.montecarlo import node_states, route_latency
from omniplane.plan.routing import node_share
from tests.plan.conftest import table


def _single(tab, nodes, choice):  # type: ignore[no-untyped-def]
    model = tab.model
    lp = compose((subplan_of(model, nodes),), len(model.type_names))
    costs = tuple(tab.node(n) for n in lp.nodes)
    p = np.ones((1, len(model.type_names), 1))
    opt = np.array([choice])
    return Candidates(lp, costs, p, node_share(lp, p), opt, np.ones_like(opt), np.zeros(1, dtype=int),
                      np.ones(1), np.ones(1, dtype=int))


@pytest.mark.parametrize("split", [False, True])
def test_zero_load_latency_is_the_solo_latency(split: bool) -> None:
    tab = table("qwen3-vl-servegen")
    model = tab.model
    comps = ("vision_encoder", "llm")
    nodes = tuple(frozenset([c]) for c in comps) if split else (frozenset(comps),)
    choice = [tab.node(n).options.index((2, 64)) if "llm" in n else 0 for n in nodes]
    cands = _single(tab, nodes, choice)
    state = node_states(cands, tab, np.zeros((1, len(nodes), len(model.type_names))))
    for t in model.type_names:
        ti = model.type_names.index(t)
        lat = route_latency(tab, cands, state, ti, cands.lp.routes[ti][0], 0.010)[0]
        cfgs = {}
        for n, o in zip(nodes, choice, strict=True):
            tp, b = tab.node(n).options[o]
            for c in n:
                cfgs[c] = ExecutorConfig(tab.problem.gpu, tp, b)
        placement = {c: "+".join(sorted(n)) for n in nodes for c in n}
        solo = np.array([request_latency(model, tab.cost, cfgs, t, w, placement, 0.010)
                         for w in tab.problem.samples[t]])
        # parts interpolate the cost model over a grid of sizes: within a few percent
        assert np.median(np.abs(lat - solo) / solo) < 0.02, t
        assert np.abs(lat - solo).max() / solo.max() < 0.06, t


def test_latency_grows_with_load_and_stays_positive() -> None:
    tab = table("qwen3-vl-servegen")
    model = tab.model
    nodes = (frozenset(["vision_encoder", "llm"]),)
    cands = _single(tab, nodes, [tab.node(nodes[0]).options.index((2, 64))])
    uniform = np.full(len(model.type_names), 1 / len(model.type_names))
    capacity = 1 / float(cands.costs[0].s_full[cands.opt[0, 0]] @ uniform)  # the flow bound
    lams = [f * capacity for f in (0.0, 0.2, 0.5, 0.8, 0.95)]  # the phase runs below it (alpha R_d)
    ti = model.type_names.index("ti2t")
    meds = []
    for lam in lams:
        rate = np.zeros((1, 1, len(model.type_names)))
        rate[0, 0, :] = lam / len(model.type_names)
        state = node_states(cands, tab, rate)
        meds.append(float(np.median(route_latency(tab, cands, state, ti, (0,), 0.010))))
    assert all(m > 0 for m in meds)
    assert meds == sorted(meds)
