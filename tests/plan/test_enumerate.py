"""Algorithm 1: simple, compound and logical plans."""

from __future__ import annotations

from omniplane.plan.enumerate import (
    compound_subplans,
    count_logical,
    logical_plans,
    partitions,
    path_unions,
    simple_subplans,
)
from omniplane.spec import ModelSpec, load_model, parse
from tests.spec.builders import tiny_model


def _tiny() -> ModelSpec:
    return parse(ModelSpec, tiny_model())


def test_subgraphs_are_the_unions_of_type_paths() -> None:
    model = load_model("qwen3-omni")
    subs = path_unions(model)
    # image + thinker always; video and audio encoders optional; talker + code2wav optional
    assert len(subs) == 8
    paths = [frozenset(model.request_type(t).path) for t in model.type_names]
    for s in subs:
        assert s == frozenset().union(*[p for p in paths if p <= s])


def test_keep_merge_gives_every_hostable_partition_once() -> None:
    model = _tiny()
    parts = partitions(model, frozenset(["enc", "thinker", "talker", "voc"]))
    # a chain of 3 colocatable edges: 2^3 distinct partitions, all hostable
    assert len(parts) == 8
    for nodes in parts:
        assert frozenset().union(*nodes) == {"enc", "thinker", "talker", "voc"}
        assert sum(len(n) for n in nodes) == 4


def test_simple_subplans_cover_types_without_unused_components() -> None:
    model = load_model("qwen3-omni")
    for sp in simple_subplans(model):
        comps = frozenset().union(*sp.nodes)
        used = frozenset().union(*[frozenset(model.request_type(t).path) for t in
                                   (model.type_names[i] for i in sp.covered)])
        assert sp.covered and comps == used
        for t, rs in enumerate(sp.routes):
            for route, _ in rs:
                served = frozenset().union(*[sp.nodes[n] for n in route])
                assert frozenset(model.request_type(model.type_names[t]).path) <= served


def test_compound_subplans_share_a_node_and_add_a_route() -> None:
    model = _tiny()
    simple = simple_subplans(model)
    comp = compound_subplans(model, simple, 2)
    assert comp
    for sp in comp:
        assert sp.lanes == 2
        assert any(len(rs) == 2 for rs in sp.routes)
    assert compound_subplans(model, simple, 1) == []


def test_logical_plans_cover_every_type_and_are_counted() -> None:
    model = _tiny()
    simple = simple_subplans(model)
    subs = simple + compound_subplans(model, simple, 2)
    plans = list(logical_plans(subs, len(model.type_names), 2))
    assert plans and len(plans) == count_logical(subs, len(model.type_names), 2)
    for lp in plans:
        assert all(lp.routes[t] for t in range(len(model.type_names)))
    singles = list(logical_plans(subs, len(model.type_names), 1))
    assert all(len(lp.subplans) == 1 for lp in singles)
