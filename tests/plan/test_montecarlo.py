"""Monte Carlo latency: at zero load it is the solo latency the simulator agrees with."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from omniplane.perf import ExecutorConfig
from omniplane.perf.solo import request_latency
from omniplane.plan.costs import FILLS
from omniplane.plan.enumerate import subplan_of
from omniplane.plan.flow import Candidates
from omniplane.plan.logical import compose
from omniplane.plan.montecarlo import (
    admission_queue,
    kv_slots,
    node_states,
    route_latency,
    step_queue_factor,
)
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


def test_step_queue_factor_is_pollaczek_khinchine_and_erlang_c() -> None:
    """One executor: the residual over 1 - u (M/G/1); two: M/M/2's ratio to M/M/1, C(2, 2u) =
    2u^2 / (1 + u); never below 1, growing with u, infinite at u = 1; a node's pooled executors
    wait less than one executor at the same utilisation."""
    u = np.array([0.2, 0.5, 0.8, 0.95, 0.99])
    one = step_queue_factor(u, np.ones(5, dtype=int))
    assert one == pytest.approx(np.maximum(1.0, 1 / (1 - u)))
    two = step_queue_factor(u, np.full(5, 2))
    assert two == pytest.approx(np.maximum(1.0, (2 * u**2 / (1 + u)) / (2 * u) / (1 - u)))
    assert np.all(np.diff(one) > 0) and np.all(two <= one) and np.all(two >= 1.0)
    assert np.isinf(step_queue_factor(np.array([1.0]), np.array([1]))[0])
    assert step_queue_factor(np.zeros(0), np.zeros(0, dtype=int)).shape == (0,)  # no candidates


def test_executors_pooled_in_a_node_wait_less_than_one_alone_near_capacity() -> None:
    """Near its full-batch capacity one executor fed alone (a copy of a subplan side by side,
    c = 1) waits longer for the step in progress than each of two pooled in one node (c = 2,
    dispatch to the least loaded: Erlang C), at the same load per executor; the SLO resolver's
    processing-only latencies (no queueing) do not tell them apart."""
    tab = table("qwen3-vl-servegen")
    model = tab.model
    nodes = (frozenset(["vision_encoder", "llm"]),)
    alone = _single(tab, nodes, [tab.node(nodes[0]).options.index((1, 32))])
    pooled = dataclasses.replace(alone, cnt=np.full_like(alone.cnt, 2))
    uniform = np.full(len(model.type_names), 1 / len(model.type_names))
    capacity = 1 / float(alone.costs[0].s_full[alone.opt[0, 0]] @ uniform)
    rate = np.full((1, 1, len(model.type_names)), 0.9 * capacity / len(model.type_names))
    for c in ("vision_encoder", "llm"):
        one, two = node_states(alone, tab, rate)[(0, c)][1][0], node_states(pooled, tab, rate)[(0, c)][1][0]
        assert two < one
        plain = [node_states(x, tab, rate, queueing=False)[(0, c)][1][0] for x in (alone, pooled)]
        assert plain[0] == plain[1] <= two


def _llm_alone(tab):  # type: ignore[no-untyped-def]
    nodes = (frozenset(["vision_encoder"]), frozenset(["llm"]))
    return _single(tab, nodes, [0, tab.node(nodes[1]).options.index((1, 32))])


def test_wait_for_the_step_in_progress_is_the_pk_mean_residual() -> None:
    """Without queueing, a lone component's wait is the P-K mean residual of its steps, busy x
    E[S^2] / (2 E[S]): with every step's mean square doubled (the same mean step) it doubles;
    with each type's steps of constant length it is busy x E[S^2] / (2 E[S]) over the types'
    steps (M/G/1 with a deterministic step per type)."""
    tab = table("qwen3-vl-servegen")
    model = tab.model
    cands = _llm_alone(tab)
    uniform = np.full(len(model.type_names), 1 / len(model.type_names))
    capacity = 1 / float(cands.costs[1].s_full[cands.opt[0, 1]] @ uniform)
    rate = np.full((1, 2, len(model.type_names)), 0.7 * capacity / len(model.type_names))
    base = node_states(cands, tab, rate, queueing=False)[(1, "llm")][1][0]
    arr = tab.arrays()
    saved = arr.step_sq.copy()
    try:
        arr.step_sq[:] = 2 * saved
        doubled = node_states(cands, tab, rate, queueing=False)[(1, "llm")][1][0]
        arr.step_sq[:] = arr.step ** 2
        constant = node_states(cands, tab, rate, queueing=False)[(1, "llm")][1][0]
    finally:
        arr.step_sq[:] = saved
    assert base > 0 and doubled == pytest.approx(2 * base)
    assert constant < base  # prefill iterations make the steps vary: the residual is longer
    lam = rate[0, 1]
    level = node_states(cands, tab, rate, queueing=False)[(1, "llm")][0][0]
    pid = cands.costs[1].part["llm"][cands.opt[0, 1], :, level]
    busy = float((lam * arr.cost[pid]).sum())
    steps = lam * arr.cost[pid] / arr.step[pid]  # steps per second each type accounts for
    residual = float((steps * arr.step[pid] ** 2).sum() / (2 * (steps * arr.step[pid]).sum()))
    assert constant == pytest.approx(min(busy, 1.0) * residual)


def test_llm_steps_vary_once_prompts_join() -> None:
    """The LLM part's step mean square: equal to the squared mean when no prompt joins (every
    iteration a decode of the same batch), above it when prompts join and prefill chunks make
    some iterations long (the simulator's mixed steps)."""
    from omniplane.plan.parts import _mean_iteration

    tab = table("qwen3-vl-servegen")
    cfg = ExecutorConfig(tab.problem.gpu, 1, 32)
    prompts = np.asarray(tab.work["ti2t"].get("llm", "prompt_tokens"))
    mean0, sq0 = _mean_iteration(tab.cost, "llm", cfg, prompts, 0.0, 16, 1000.0, 8192 - 16)
    assert sq0 == pytest.approx(mean0 ** 2)
    mean1, sq1 = _mean_iteration(tab.cost, "llm", cfg, prompts, 0.2, 16, 1000.0, 8192 - 16)
    assert mean1 > mean0 and sq1 > 1.5 * mean1 ** 2


@pytest.mark.parametrize("n", [2, 3])
def test_admission_queue_is_pooled_over_a_nodes_executors(n: int) -> None:
    """Dispatch goes to the node's least-loaded executor (the simulator's rule), so a request
    waits for admission in the node's pooled queue: with ``n`` executors at the same load per
    executor the admission wait is shorter than one executor's alone, yet still positive near
    capacity; for a component whose residence does not depend on its occupancy it is the
    M/M/(n B) queue (Erlang C, closed form) shared by the ``n`` executors."""
    tab = table("qwen3-vl-servegen")
    model = tab.model
    nodes = (frozenset(["vision_encoder", "llm"]),)
    alone = _single(tab, nodes, [tab.node(nodes[0]).options.index((1, 32))])
    pooled = dataclasses.replace(alone, cnt=np.full_like(alone.cnt, n))
    uniform = np.full(len(model.type_names), 1 / len(model.type_names))
    capacity = 1 / float(alone.costs[0].s_full[alone.opt[0, 0]] @ uniform)
    rate = np.full((1, 1, len(model.type_names)), 0.95 * capacity / len(model.type_names))
    base = node_states(alone, tab, rate, queueing=False)
    one, many = node_states(alone, tab, rate), node_states(pooled, tab, rate)
    for key in one:
        q_one = float(one[key][1][0] - base[key][1][0])
        q_many = float(many[key][1][0] - base[key][1][0])
        assert 0.0 <= q_many <= q_one
    assert max(float(many[k][1][0] - base[k][1][0]) for k in many) > 0.0
    b, a = 4, 3.2  # per executor: 4 slots, offered load 3.2 (lambda x constant residence)
    pooled_q = admission_queue(np.full((1, len(FILLS)), n * a), np.array([float(n * b)]))[0]
    assert pooled_q == pytest.approx(_erlang_c_queue(n * b, n * a), rel=1e-9)
    assert pooled_q / n < admission_queue(np.full((1, len(FILLS)), a), np.array([float(b)]))[0]


def test_an_llms_cache_holds_its_held_mix_at_their_mean_context() -> None:
    """``kv_slots``: ``min(max batch, KV / sum_t h_t ctx_t)`` with ``h`` the held shares. A type
    alone: its own ``KV / ctx`` or the batch; two types the cache holds 100 and 10 of alone, held
    equally: ``1 / (0.5 / 100 + 0.5 / 10)`` = 18.2, not their arrival mean of 55; the type held
    longer weighs more; nothing held keeps the given fallback."""
    kv_ctx = np.array([[100.0, 10.0]] * 5)
    batch = np.array([256, 256, 256, 16, 256])
    held = np.array([[3.0, 0.0], [1.0, 1.0], [1.0, 9.0], [1.0, 1.0], [0.0, 0.0]])
    got = kv_slots(held, kv_ctx, batch, np.full(5, 7.0))
    assert got[0] == pytest.approx(100.0)
    assert got[1] == pytest.approx(1 / (0.5 / 100 + 0.5 / 10))
    assert 10.0 < got[2] < got[1]
    assert got[3] == 16.0  # the max batch binds first
    assert got[4] == 7.0
