"""The wait before service is sampled from its law (plan/waits.py), not added as its mean."""

from __future__ import annotations

import math

import numpy as np
import pytest

from omniplane.plan.costs import FILLS
from omniplane.plan.enumerate import subplan_of
from omniplane.plan.flow import Candidates
from omniplane.plan.logical import compose
from omniplane.plan.montecarlo import admission_chain, node_states, route_latency
from omniplane.plan.routing import node_share
from omniplane.plan.waits import WaitLaw, erlang_c, wait_draws
from tests.plan.conftest import table

NODES = (frozenset(["vision_encoder", "llm"]),)


def _merged(tab, options):  # type: ignore[no-untyped-def]
    """Candidates: Qwen3-VL's merged executor, one row per (tp, max batch) in ``options``."""
    model = tab.model
    lp = compose((subplan_of(model, NODES),), len(model.type_names))
    costs = tuple(tab.node(n) for n in lp.nodes)
    p = np.ones((1, len(model.type_names), 1))
    opt = np.array([[costs[0].options.index(o)] for o in options])
    n = len(options)
    return Candidates(lp, costs, p, node_share(lp, p), opt, np.ones_like(opt), np.zeros(n, dtype=int),
                      np.ones(n), np.ones(n, dtype=int))


def _near_capacity(tab, cands, load=0.95):  # type: ignore[no-untyped-def]
    """Arrivals ``[C, 1, T]`` at ``load`` of the first candidate's flow bound, types uniform."""
    n_t = len(tab.model.type_names)
    capacity = 1 / float(cands.costs[0].s_full[cands.opt[0, 0]] @ np.full(n_t, 1 / n_t))
    return np.full((len(cands), 1, n_t), load * capacity / n_t)


def _erlang_c(c: int, a: float) -> float:
    """P(wait > 0) of M/M/c at offered load ``a`` (closed form)."""
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / math.factorial(c) / (1 - a / c)
    return tail / (head + tail)


@pytest.mark.parametrize(("c", "a"), [(1, 0.5), (2, 1.5), (4, 3.0), (16, 12.0)])
def test_admission_wait_is_zero_with_erlang_c_complement(c: int, a: float) -> None:
    """With a constant residence the chain is M/M/c: P(N >= B) is Erlang C, and a law with
    only the admission part waits 0 in the samples with probability 1 - C."""
    queue, full = admission_chain(np.full((1, len(FILLS)), a), np.array([float(c)]))
    assert float(full[0]) == pytest.approx(_erlang_c(c, a), rel=1e-9)
    assert float(erlang_c(np.array([a / c]), np.array([c]))[0]) == pytest.approx(_erlang_c(c, a), rel=1e-9)
    zero = np.zeros(1)
    law = WaitLaw(zero, zero, zero, zero, zero, full, queue / a)  # wait = queue / lambda (Little)
    waits = law.sample(wait_draws("t", "x", 100_000))[0]
    assert float(np.mean(waits == 0.0)) == pytest.approx(1 - _erlang_c(c, a), abs=1e-3)
    # given a wait, exponential: M/M/c's conditional wait has mean 1 / (c mu - lambda), mu = 1
    assert float(waits[waits > 0].mean()) == pytest.approx(1 / (c - a), rel=0.02)


def test_sampled_waits_keep_the_mean_wait() -> None:
    """The sampled waits' mean converges to the mean wait Monte Carlo used before (the state's
    ``wait``), per component; near capacity every part of the wait is present. A sample waits
    0 exactly when none of the nested events occurs (idle executor, no queue, a free slot)."""
    tab = table("qwen3-vl-servegen")
    cands = _merged(tab, [(1, 32)])
    parts = set()
    for load in (0.6, 0.95):
        state = node_states(cands, tab, _near_capacity(tab, cands, load))
        for key, st in state.items():
            law = st.law
            assert law is not None
            assert float(law.mean[0]) == pytest.approx(float(st.wait[0]), rel=1e-12)
            parts |= {name for name in ("busy_mean", "turns_mean", "queued_mean", "admit_mean")
                      if getattr(law, name)[0] > 0}
            waits = law.sample(wait_draws("ti2t", key[1], 1_000_000))[0]
            assert float(waits.mean()) == pytest.approx(float(st.wait[0]), rel=0.02), key
            p_any = max(float(p[0]) for p, m in ((law.p_busy, law.busy_mean), (law.p_queued, law.queued_mean),
                                                 (law.p_admit, law.admit_mean)) if m[0] > 0)
            assert float(np.mean(waits == 0.0)) == pytest.approx(1.0 - p_any, abs=1e-3), key
    assert parts == {"busy_mean", "turns_mean", "queued_mean", "admit_mean"}
    assert node_states(cands, tab, _near_capacity(tab, cands), spread=False)[key].law is None


def test_mean_wait_above_target_no_longer_means_no_sample_meets_it() -> None:
    """A target every sample misses when each waits the mean wait is met by the samples that
    find the executor idle, and missed by those that queue: attainment strictly between 0 and 1."""
    tab = table("qwen3-vl-servegen")
    cands = _merged(tab, [(1, 32)])
    rate = _near_capacity(tab, cands)
    ti = tab.model.type_names.index("ti2t")
    route = cands.lp.routes[ti][0]
    mean = route_latency(tab, cands, node_states(cands, tab, rate, spread=False), ti, route, 0.010)[0]
    spread = route_latency(tab, cands, node_states(cands, tab, rate), ti, route, 0.010)[0]
    target = float(mean.min()) * 0.999
    assert float(np.mean(mean <= target)) == 0.0
    assert 0.0 < float(np.mean(spread <= target)) < 1.0


def test_wait_draws_are_common_random_numbers() -> None:
    """The same draws for every candidate and evaluation: a plan's sampled latencies do not
    depend on which other plans are evaluated with it, repeat exactly, and a screen's first
    ``k`` samples get the full set's first ``k`` draws."""
    tab = table("qwen3-vl-servegen")
    both = _merged(tab, [(1, 32), (2, 64)])
    one = _merged(tab, [(1, 32)])
    rate = _near_capacity(tab, both)
    ti = tab.model.type_names.index("ti2t")
    route = both.lp.routes[ti][0]
    lat_both = route_latency(tab, both, node_states(both, tab, rate), ti, route, 0.010)
    lat_one = route_latency(tab, one, node_states(one, tab, rate[:1]), ti, route, 0.010)
    again = route_latency(tab, one, node_states(one, tab, rate[:1]), ti, route, 0.010)
    np.testing.assert_array_equal(lat_both[0], lat_one[0])
    np.testing.assert_array_equal(lat_one, again)
    head = route_latency(tab, one, node_states(one, tab, rate[:1]), ti, route, 0.010, samples=8)
    np.testing.assert_array_equal(head, lat_one[:, :8])
    assert not np.array_equal(wait_draws("ti2t", "llm", 64), wait_draws("t2t", "llm", 64))
