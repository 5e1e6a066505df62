"""The flow phase: the chain of non-redundant count vectors is exactly the non-redundant set."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.plan.costs import NodeCosts
from omniplane.plan.flow import Candidates, Expansion, raw_count, top_rate
from omniplane.plan.logical import Subplan, compose


class FakeTable:
    """Nodes with given per-type costs (executor-seconds per request) and TP degrees."""

    def __init__(self, nodes: list[NodeCosts]) -> None:
        self.nodes = {frozenset([f"c{i}"]): n for i, n in enumerate(nodes)}

    def node(self, key: frozenset[str]) -> NodeCosts:
        return self.nodes[key]


def _chain_instance(costs: list[list[float]], tps: list[int]) -> tuple[FakeTable, object]:
    nodes = [NodeCosts((f"c{i}",), ((tp, 8),), (), np.array([tp]), np.array([[c, c]]))
             for i, (c, tp) in enumerate(zip([x[0] for x in costs], tps, strict=True))]
    for nc, c in zip(nodes, costs, strict=True):
        nc.s_full = np.array([c])
    keys = tuple(frozenset([f"c{i}"]) for i in range(len(costs)))
    sp = Subplan(keys, (((tuple(range(len(keys))), 0),), ((tuple(range(len(keys))), 0),)), 1)
    return FakeTable(nodes), compose((sp,), 2)


def _all(exp: Expansion, thr: float) -> Candidates:
    opt, vec, top, cnt = exp.rows(thr)
    return exp.elements(opt, vec, top, cnt, thr)


def _one_option(table: FakeTable) -> list[np.ndarray]:
    return [np.zeros(1, dtype=int) for _ in table.nodes]


def _non_redundant(load: np.ndarray, tps: list[int], budget: int) -> dict[tuple[int, ...], float]:
    out = {}
    for cnt in itertools.product(*[range(1, budget // t + 1) for t in tps]):
        if sum(c * t for c, t in zip(cnt, tps, strict=True)) > budget:
            continue
        rate = min(c / x for c, x in zip(cnt, load, strict=True))
        redundant = any(c > 1 and (c - 1) / x >= rate - 1e-12 for c, x in zip(cnt, load, strict=True))
        if not redundant:
            out[cnt] = rate
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 2.0), st.floats(0.01, 2.0), st.sampled_from([1, 1, 2])),
                min_size=1, max_size=3),
       st.integers(1, 9), st.floats(0.05, 0.95))
def test_chain_is_exactly_the_non_redundant_plans_in_budget(nodes, budget, share) -> None:  # type: ignore[no-untyped-def]
    costs = [[a, b] for a, b, _ in nodes]
    tps = [t for _, _, t in nodes]
    table, lp = _chain_instance(costs, tps)
    pi = np.array([share, 1 - share])
    p = np.ones((1, 2, 1))
    exp = Expansion(lp, table, p, pi, budget, _one_option(table))  # type: ignore[arg-type]
    cands = _all(exp, 0.0)
    got = {tuple(c): r for c, r in zip(cands.cnt.tolist(), cands.rate.tolist(), strict=True)}
    assert len(got) == len(cands)  # each plan once
    load = np.array([c[0] * pi[0] + c[1] * pi[1] for c in costs])
    want = _non_redundant(load, tps, budget)
    assert set(got) == set(want)
    for k, r in want.items():
        assert abs(got[k] - r) <= 1e-9 * max(1.0, r)


def test_threshold_drops_exactly_the_plans_below_it() -> None:
    table, lp = _chain_instance([[0.2, 0.2], [0.05, 0.05]], [1, 1])
    pi = np.array([0.5, 0.5])
    p = np.ones((1, 2, 1))
    exp = Expansion(lp, table, p, pi, 8, _one_option(table))  # type: ignore[arg-type]
    every = _all(exp, 0.0).rate.tolist()
    cut = sorted(every)[len(every) // 2]
    kept = _all(exp, cut).rate.tolist()
    assert sorted(kept) == sorted(r for r in every if r >= cut)


def test_top_rate_is_the_largest_breakpoint_that_fits() -> None:
    load = np.array([[[0.3, 0.1]]])
    tp = np.array([[1, 2]])
    top = float(top_rate(tp, load, 7)[0, 0])
    # breakpoints x/0.3 and x/0.1; counts (ceil(R .3), ceil(R .1)) with GPUs c0 + 2 c1 <= 7
    best = max(r for x in range(1, 20) for r in (x / 0.3, x / 0.1)
               if max(1, np.ceil(r * 0.3 - 1e-9)) + 2 * max(1, np.ceil(r * 0.1 - 1e-9)) <= 7)
    assert abs(top - best) < 1e-9


def test_raw_count_counts_config_and_count_vectors() -> None:
    a = NodeCosts(("a",), ((1, 8), (2, 8)), (), np.array([1, 2]), np.zeros((2, 1)))
    b = NodeCosts(("b",), ((1, 8),), (), np.array([1]), np.zeros((1, 1)))
    # node a: tp1 x in 1..N, tp2 x in 1..N/2; node b tp1; total GPUs <= 4
    brute = sum(1 for ta in (1, 2) for xa in range(1, 5) for xb in range(1, 5) if ta * xa + xb <= 4)
    assert raw_count((a, b), 3, 4) == 3 * brute
