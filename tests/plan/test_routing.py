"""Routing vectors on the probability grid."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.plan.enumerate import compound_subplans, simple_subplans
from omniplane.plan.logical import compose
from omniplane.plan.routing import compositions, round_to_grid, routing_vectors
from omniplane.spec import ModelSpec, parse
from tests.spec.builders import tiny_model


def test_compositions_are_every_split() -> None:
    rows = compositions(10, 3)
    assert len(rows) == 66  # C(12, 2)
    assert (rows.sum(axis=1) == 10).all() and (rows >= 0).all()
    assert len({tuple(r) for r in rows.tolist()}) == 66


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5).filter(lambda x: sum(x) > 1e-3),
       st.sampled_from([2, 4, 10]))
def test_grid_rounding_sums_to_one_and_stays_close(raw, steps) -> None:  # type: ignore[no-untyped-def]
    p = np.array(raw) / sum(raw)
    q = round_to_grid(p, steps)
    assert abs(q.sum() - 1) < 1e-9
    assert np.allclose(q * steps, np.round(q * steps))
    assert np.abs(q - p).max() <= 1.0 / steps + 1e-9


def test_routing_vectors_sum_to_one_per_type_and_use_every_node() -> None:
    model = parse(ModelSpec, tiny_model())
    simple = simple_subplans(model)
    for sp in compound_subplans(model, simple, 2)[:10]:
        lp = compose((sp,), len(model.type_names))
        vecs = routing_vectors(lp, 10, 121)
        assert len(vecs)
        for t, rs in enumerate(lp.routes):
            assert np.allclose(vecs[:, t, : len(rs)].sum(axis=1), 1.0)
            assert (vecs[:, t, len(rs):] == 0).all()
