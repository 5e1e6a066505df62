"""KV preemption on a KV-tight LLM executor in the Monte Carlo phase (plan.kvpreempt)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from omniplane.plan.kvpreempt import kv_moments, overflow_share
from omniplane.plan.montecarlo import node_states
from tests.plan.conftest import table
from tests.plan.test_montecarlo import _llm_alone


def test_overflow_share_is_the_tail_of_the_kv_demand() -> None:
    """Half the time over capacity when the mean demand is the capacity; less with more room;
    none with nothing held; at most ``b`` sequences resident whatever the queue."""
    m1, m2 = np.array([500.0]), np.array([500.0**2 * 1.2])
    b = np.array([32.0])
    assert overflow_share(np.array([10.0]), m1, m2, np.array([5000.0]), b)[0] == pytest.approx(0.5)
    shares = [overflow_share(np.array([10.0]), m1, m2, np.array([k]), b)[0] for k in (4000.0, 6000.0, 9000.0)]
    assert shares[0] > 0.5 > shares[1] > shares[2] > 0
    assert overflow_share(np.array([0.0]), m1, m2, np.array([5000.0]), b)[0] == 0
    capped = overflow_share(np.array([1000.0]), m1, m2, np.array([5000.0]), np.array([4.0]))[0]
    assert capped == overflow_share(np.array([4.0]), m1, m2, np.array([5000.0]), np.array([4.0]))[0]


def test_kv_moments_of_linear_decode_growth() -> None:
    tab = table("qwen3-vl-servegen")
    w = tab.work["ti2t"]
    p, o = w.get("llm", "prompt_tokens"), w.get("llm", "output_tokens")
    m1, m2, prompt = kv_moments(w, "llm")
    assert m1 == pytest.approx(float(np.mean(p + o / 2)))
    assert prompt == pytest.approx(float(np.mean(p)))
    assert m1**2 <= m2 <= float(np.mean((p + o) ** 2))  # x = prompt + U output lies in [prompt, peak]


def _tight(cands, kv: float):  # type: ignore[no-untyped-def]
    llm = cands.costs[1]
    costs = (cands.costs[0], dataclasses.replace(llm, kv=np.full(len(llm.kv), kv)))
    return dataclasses.replace(cands, costs=costs)


def test_a_kv_tight_llm_recomputes_and_waits_longer() -> None:
    """The same LLM executor at the same load: with a KV cache that the held sequences' demand
    overflows, each further step of its requests carries recompute time, and the wait grows;
    with room to spare (or without the load terms, the SLO's processing-only view) nothing
    changes. Fails without the KV preemption term (a lone component has no turns)."""
    tab = table("qwen3-vl-servegen")
    model = tab.model
    cands = _llm_alone(tab)
    uniform = np.full(len(model.type_names), 1 / len(model.type_names))
    capacity = 1 / float(cands.costs[1].s_full[cands.opt[0, 1]] @ uniform)
    rate = np.full((1, 2, len(model.type_names)), 0.7 * capacity / len(model.type_names))
    roomy = node_states(_tight(cands, 1e9), tab, rate)[(1, "llm")]
    m1 = max(tab.llm_kv("llm")[0])
    tight = node_states(_tight(cands, 4 * m1), tab, rate)[(1, "llm")]
    assert roomy[2][0] == 0.0  # no turns: one component, nothing recomputed
    assert tight[2][0] > 0.0  # recompute carried by every further step
    assert tight[1][0] > roomy[1][0]  # the executor is busier: a longer wait
    plain = node_states(_tight(cands, 4 * m1), tab, rate, queueing=False)[(1, "llm")]
    assert plain[2][0] == 0.0
