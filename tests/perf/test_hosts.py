"""The one host placement (omniplane.perf.hosts): each kind's groups on hosts of that kind, a
pipeline whole on one host when it fits, else in pipeline order; an edge within a host only
when every replica of both ends is on it."""

from __future__ import annotations

import pytest

from omniplane.perf.hosts import Pipeline, PlacementError, Stage, pipeline_order, place_kinds


def test_each_kind_is_placed_on_its_own_hosts_of_its_own_size() -> None:
    pipe = Pipeline("p", (Stage("thinker", 4, 1, "H100"), Stage("talker", 6, 1, "L40S"),
                          Stage("code2wav", 2, 1, "L40S")))
    hosts = place_kinds([pipe], {"H100": 8, "L40S": 4})
    assert hosts.kinds.count("H100") == 1 and hosts.kinds.count("L40S") == 2  # 8 L40S on hosts of 4
    assert not hosts.in_host("p", "thinker", "talker")  # two kinds: two hosts
    assert len(hosts.hosts_of("p", "talker")) == 2  # 6 on hosts of 4
    assert not hosts.in_host("p", "talker", "code2wav")  # a talker replica is on the other host
    assert {hosts.kinds[s.host] for s in hosts.seats if s.node == "code2wav"} == {"L40S"}


def test_a_pipeline_that_fits_a_host_keeps_every_edge_in_it() -> None:
    hosts = place_kinds([Pipeline("p", (Stage("a", 3, 1, "L40S"), Stage("b", 2, 2, "L40S")))], 8)
    assert hosts.in_host("p", "a", "b") and len(hosts.kinds) == 1


def test_a_tp_group_larger_than_a_host_is_refused() -> None:
    with pytest.raises(PlacementError, match="TP 4"):
        place_kinds([Pipeline("p", (Stage("a", 1, 4, "L40S"),))], 2)


def test_nodes_go_in_pipeline_order_of_their_first_component() -> None:
    topo = ["enc", "thinker", "talker", "code2wav"]
    assert pipeline_order(topo, [{"code2wav"}, {"talker"}, {"enc", "thinker"}]) == [2, 1, 0]
