"""Monte Carlo latency: at zero load it is the solo latency the simulator agrees with."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.perf import ExecutorConfig
from omniplane.perf.solo import request_latency
from omniplane.plan.costs import FILLS
from omniplane.plan.enumerate import subplan_of
from omniplane.plan.flow import Candidates
from omniplane.plan.logical import compose
from omniplane.plan.montecarlo import admission_queue, node_states, route_latency
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


def _erlang_c_queue(c: int, a: float) -> float:
    """Mean queue length of M/M/c with offered load ``a`` (closed form)."""
    import math

    rho = a / c
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / math.factorial(c) / (1 - rho)
    return float(tail / (head + tail) * rho / (1 - rho))


@pytest.mark.parametrize(("c", "a"), [(1, 0.5), (1, 0.9), (4, 3.0), (16, 12.0), (64, 60.0)])
def test_admission_queue_is_the_m_m_c_queue_when_residence_is_constant(c: int, a: float) -> None:
    """A component whose residence does not depend on its occupancy is an M/M/c queue with c
    = the batch limit: the chain gives Erlang C's mean queue length exactly."""
    conc = np.full((1, len(FILLS)), a)  # lambda x residence, the same at every occupancy level
    got = float(admission_queue(conc, np.array([float(c)]))[0])
    assert got == pytest.approx(_erlang_c_queue(c, a), rel=1e-9)


def test_admission_queue_grows_with_load_and_is_infinite_when_overloaded() -> None:
    """The queue grows with the load of the batch limit, is 0 far below it and infinite at or
    above it; a step that grows in proportion to the batch (processor-sharing-like) holds
    fewer requests at the same per-request load, so it queues less for admission (its
    latency grows through the residence instead)."""
    b = 32.0
    queues = [float(admission_queue(np.full((1, len(FILLS)), f * b), np.array([b]))[0])
              for f in (0.3, 0.6, 0.8, 0.95)]
    assert queues == sorted(queues) and queues[-1] > 0
    assert np.isinf(admission_queue(np.full((1, len(FILLS)), 1.01 * b), np.array([b]))[0])
    assert admission_queue(np.full((1, len(FILLS)), 0.01 * b), np.array([b]))[0] == 0.0
    shared = 0.8 * np.maximum(1.0, b * FILLS)[None, :]
    assert admission_queue(shared, np.array([b]))[0] < queues[2]


def test_queueing_only_adds_waiting() -> None:
    """The admission queue never shortens a wait (the SLO resolver's isolated latencies use
    none), and near the flow bound it adds some."""
    tab = table("qwen3-vl-servegen")
    model = tab.model
    nodes = (frozenset(["vision_encoder", "llm"]),)
    cands = _single(tab, nodes, [tab.node(nodes[0]).options.index((1, 32))])
    uniform = np.full(len(model.type_names), 1 / len(model.type_names))
    capacity = 1 / float(cands.costs[0].s_full[cands.opt[0, 0]] @ uniform)
    rate = np.full((1, 1, len(model.type_names)), 0.95 * capacity / len(model.type_names))
    with_q = node_states(cands, tab, rate)
    without = node_states(cands, tab, rate, queueing=False)
    added = [float(with_q[k][1][0] - without[k][1][0]) for k in with_q]
    assert min(added) >= 0.0 and max(added) > 0.0
