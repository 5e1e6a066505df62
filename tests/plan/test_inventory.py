"""Mixed-fleet inventory search (omniplane.plan.inventory): parsing, sizing under per-kind
counts, the runtime fit per kind, and the bound."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from omniplane.plan.inventory import (
    InventoryError,
    Option,
    candidates,
    parse_inventory,
    size,
    to_spec,
)
from omniplane.spec import find_catalog_model, load_gpus, load_model


def test_inventory_parses_catalog_names_and_aliases() -> None:
    assert parse_inventory("H100:8, L40S:16", load_gpus()) == {"H100-SXM": 8, "L40S": 16}


@pytest.mark.parametrize(("text", "says"), [
    ("H100", "expected KIND:COUNT"), ("H100:0", "COUNT >= 1"), ("H100:x", "KIND:COUNT"),
    ("B300:8", "unknown GPU kind 'B300'"), ("H100:8,H100-SXM:8", "given twice"), ("", "at least one"),
])
def test_a_bad_inventory_says_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(InventoryError, match=says):
        parse_inventory(text, load_gpus())


def _used(options: list[Option], reps: tuple[int, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for o, n in zip(options, reps, strict=True):
        out[o.kind] = out.get(o.kind, 0) + n * o.tp
    return out


def test_sizing_balances_the_flow_within_each_kinds_count() -> None:
    # thinker on A (0.1 s per request, tp 2), talker on B (0.05 s), vocoder on B (0.02 s)
    opts = [Option("A", 2, 32, 0.1), Option("B", 1, 32, 0.05), Option("B", 1, 32, 0.02)]
    reps, rate = size(opts, {"A": 8, "B": 16}) or ((), 0.0)
    used = _used(opts, reps)
    assert used["A"] <= 8 and used["B"] <= 16
    assert reps[0] == 4  # A's 8 GPUs are 4 thinker executors: 40 req/s
    assert rate == pytest.approx(min(n / o.w for o, n in zip(opts, reps, strict=True)))
    assert rate == pytest.approx(40.0)  # the thinker bounds; B's leftovers go to B's stages
    assert used["B"] == 16


def test_a_target_rate_keeps_the_counts_it_needs_or_none() -> None:
    opts = [Option("A", 1, 32, 0.1), Option("B", 1, 32, 0.05)]
    got = size(opts, {"A": 8, "B": 16}, rate=30.0)
    assert got is not None and got[0] == (3, 2) and got[1] == pytest.approx(30.0)
    assert size(opts, {"A": 2, "B": 16}, rate=30.0) is None  # 3 thinker GPUs needed, 2 held


def _table(costs: dict[frozenset[str], tuple[int, float] | None], n_types: int = 1) -> Any:
    """A cost table whose nodes have one option (tp, seconds per request) or none (no fit)."""
    def node(n: frozenset[str]) -> Any:
        c = costs.get(n)
        if c is None:
            return SimpleNamespace(options=(), s_full=np.zeros((0, n_types)), tp=np.zeros(0))
        return SimpleNamespace(options=((c[0], 32),), s_full=np.full((1, n_types), c[1]), tp=np.array([c[0]]))
    return SimpleNamespace(node=node)


def test_candidates_respect_per_kind_counts_and_the_fit_per_kind() -> None:
    th, ta = frozenset({"thinker"}), frozenset({"talker"})
    tables = {"A": _table({th: (1, 0.1), ta: (1, 0.05)}),
              "B": _table({th: None, ta: (1, 0.04)})}  # the thinker does not fit B
    counts = {"A": 4, "B": 8}
    found = candidates(SimpleNamespace(), [(th, ta)], tables, counts, np.array([1.0]))  # type: ignore[arg-type]
    assert found, "A|A and A|B fit"
    for c in found:
        assert c.options[0].kind == "A"  # never on the kind it does not fit
        assert all(c.gpus_by_kind()[k] <= counts[k] for k in c.gpus_by_kind())
    assert [tuple(o.kind for o in c.options) for c in found] == [("A", "B"), ("A", "A")]  # best flow first
    # A|B: A's 4 GPUs all thinker (40 req/s); A|A: 4 GPUs shared by both stages
    assert found[0].flow_rps == pytest.approx(40.0)
    assert found[1].flow_rps < 40.0


def test_the_bound_names_the_kind_filled_most_and_its_heaviest_stage() -> None:
    th, ta = frozenset({"thinker"}), frozenset({"talker"})
    tables = {"A": _table({th: (1, 0.1), ta: (1, 0.05)}), "B": _table({th: None, ta: (1, 0.04)})}
    model = load_model(find_catalog_model("qwen3-omni") or "")
    found = candidates(model, [(th, ta)], tables, {"A": 4, "B": 8}, np.array([1.0]))
    assert found[0].bound(model, {"A": 4, "B": 8}) == ("A", "thinker")


def test_a_candidate_becomes_a_plan_with_each_group_on_its_kind() -> None:
    model = load_model(find_catalog_model("qwen3-omni") or "")
    front = frozenset({"image_encoder", "video_encoder", "audio_encoder", "thinker"})
    back = frozenset({"talker", "code2wav"})
    tables = {"H100-SXM": _table({front: (1, 0.1), back: (1, 0.05)}), "L40S": _table({back: (1, 0.05)})}
    pi = np.full(len(model.type_names), 1 / len(model.type_names))
    c = candidates(model, [(front, back)], tables, {"H100-SXM": 8, "L40S": 16}, pi)[0]
    spec = to_spec(model, c, "mix")
    assert spec.gpus_by_kind() == c.gpus_by_kind() == {"H100-SXM": 8, "L40S": 16}
    kinds = {n.name: n.executors[0].gpu for n in spec.nodes}
    assert kinds == {"+".join(model.ordered(front)): "H100-SXM", "talker+code2wav": "L40S"}
    text_route = spec.routes["ti2t"][0].nodes
    audio_route = spec.routes["ti2a"][0].nodes
    assert len(text_route) == 1 and len(audio_route) == 2


def _result(goodput: float, single: float, *, rate: float | None = None) -> Any:
    from omniplane.plan.inventory import Candidate, InventoryResult, SingleKind

    model = load_model(find_catalog_model("qwen3-omni") or "")
    th, ta = frozenset({"thinker"}), frozenset({"talker"})
    # thinker: 0.1 GPU-s per request on A, 0.8 on B; talker: 0.05 on A, 0.04 on B
    res = InventoryResult({"A": 4, "B": 8}, 8, rate, 0.9, 1, [])
    th_a, ta_b = Option("A", 1, 32, 0.1), Option("B", 1, 32, 0.04)
    res.options = {(th, "A"): th_a, (th, "B"): Option("B", 1, 32, 0.8),
                   (ta, "A"): Option("A", 1, 32, 0.05), (ta, "B"): ta_b}
    res.usd = {"A": 4.0, "B": 2.0}
    pick = Candidate((th, ta), (th_a, ta_b), (4, 8), 40.0, hourly=32.0,
                     goodput=goodput, attainment={"t2t": 0.95})
    res.pick = pick
    res.tried = [pick]
    res.singles = [SingleKind("A", 8, 32.0, goodput=single, attainment={"t2t": 0.5})]
    return res, model


def test_when_mixing_does_not_pay_the_verdict_names_the_binding_stage_and_why() -> None:
    from omniplane.plan.inventory import _verdict

    res, model = _result(goodput=30.0, single=30.0)
    pays, why = _verdict(res, model, ["t2t"])
    assert pays is False
    assert "does not pay" in why and "bound by stage thinker on A" in why
    # the thinker costs 8x the GPU-seconds on B, at half the price: 4x the dollars
    assert "8.00x the GPU-seconds per request on B and 4.00x the dollars" in why


def test_when_the_mix_serves_more_per_dollar_it_pays() -> None:
    from omniplane.plan.inventory import _verdict

    res, model = _result(goodput=40.0, single=30.0)
    pays, why = _verdict(res, model, ["t2t"])
    assert pays is True and "mixing pays: 1.33x the goodput per dollar of A alone" in why
    res, model = _result(goodput=31.0, single=30.0)  # within the margin: a tie, not a win
    assert _verdict(res, model, ["t2t"])[0] is False


def test_at_a_rate_the_mix_pays_when_no_kind_alone_meets_at_its_cost() -> None:
    from omniplane.plan.inventory import _verdict

    res, model = _result(goodput=20.0, single=10.0, rate=20.0)
    assert _verdict(res, model, ["t2t"]) == (True, "no kind alone meets the targets at the same hourly cost")


def test_cost_per_type_prices_each_stage_at_its_kind_and_adds_up_to_the_hourly_cost() -> None:
    from omniplane.plan.inventory import Candidate, InventoryResult

    # types t2t (thinker only) and t2a (thinker + talker); thinker on A ($4/h), talker on B ($1/h)
    th = Option("A", 1, 32, 0.1, per_type=(0.1, 0.1))
    ta = Option("B", 1, 32, 0.2, per_type=(0.0, 0.4))
    c = Candidate((frozenset({"thinker"}), frozenset({"talker"})), (th, ta), (2, 4), 10.0, hourly=12.0,
                  goodput=10.0, simulated_at=10.0)
    res = InventoryResult({"A": 2, "B": 4}, 8, None, 0.9, 1, [], usd={"A": 4.0, "B": 1.0},
                          mix={"t2t": 0.5, "t2a": 0.5})
    assert c.dollar_weights(res.usd, ["t2t", "t2a"]) == pytest.approx({"t2t": 0.4, "t2a": 0.8})
    per = res.cost_per_1k(c)
    assert per["t2a"] == pytest.approx(2 * (per["t2t"] or 0.0))  # twice the dollars per request
    # every type's share, times its requests in an hour, is the hourly cost
    spent = sum((per[t] or 0.0) / 1000 * 10.0 * f * 3600 for t, f in res.mix.items())
    assert spent == pytest.approx(12.0)


def test_trimming_keeps_the_binding_stage_and_drops_the_idle_replicas() -> None:
    opts = [Option("A", 1, 32, 0.1), Option("B", 1, 32, 0.05)]
    full = size(opts, {"A": 4, "B": 8})
    assert full is not None and full[0] == (4, 8) and full[1] == pytest.approx(40.0)
    trimmed = size(opts, {"A": 4, "B": 8}, full[1])  # what search() simulates as "trimmed"
    assert trimmed is not None and trimmed[0] == (4, 2) and trimmed[1] == pytest.approx(40.0)


def test_a_cross_host_edge_carrying_many_bytes_caps_the_flow_and_changes_the_ranking() -> None:
    """Thinker -> talker carrying 1 GB per request: across hosts (H100 -> L40S, 6.25 GB/s per
    GPU: L40S hosts' network) the link, not the GPUs, bounds the flow; within one H100 host
    (NVLink) it does not, so keeping both stages on the H100s ranks first; without the links
    the split ranks first."""
    from omniplane.perf.links import HOST_NETWORK_GBS
    from omniplane.plan.inventory_links import sized

    model = load_model(find_catalog_model("qwen3-omni") or "")
    th, ta = frozenset({"thinker"}), frozenset({"talker"})
    tables = {"H100-SXM": _table({th: (1, 0.01), ta: (1, 0.01)}), "L40S": _table({ta: (1, 0.005)})}
    counts = {"H100-SXM": 8, "L40S": 16}
    gpus = {k: load_gpus().get(k) for k in counts}
    means = {("thinker", "talker"): 1e9}

    def links(nodes: tuple[frozenset[str], ...], opts: list[Option], rate: float | None) -> Any:
        return sized(model, nodes, opts, gpus, counts, 8, means, rate, size)

    plain = candidates(model, [(th, ta)], tables, counts, np.array([1.0]))
    linked = candidates(model, [(th, ta)], tables, counts, np.array([1.0]), links=links)
    assert [o.kind for o in plain[0].options] == ["H100-SXM", "L40S"]
    assert [o.kind for o in linked[0].options] == ["H100-SXM", "H100-SXM"]
    split = next(c for c in linked if c.options[1].kind == "L40S")
    per_request = 1e9 / (HOST_NETWORK_GBS["pcie"] * 1e9)  # 0.16 s of link per request
    assert split.options[0].link == pytest.approx(per_request) == split.options[1].link
    thinkers = split.replicas[0]
    assert split.flow_rps == pytest.approx(thinkers / per_request)  # the link bounds, not 0.01 s of GPU
    same = linked[0]
    assert same.options[0].link == pytest.approx(1e9 / gpus["H100-SXM"].link_bw)  # NVLink within the host


def test_links_of_one_kind_follow_the_host_placement_of_the_sized_replicas() -> None:
    """16 L40S on hosts of 8 (omniplane.perf.hosts, the simulator's placement): thinker 4 x tp 2
    fill one host, talker 6 and code2wav 2 the other, so talker -> code2wav is priced within the
    host (the kind's interconnect) and thinker -> talker across hosts; before the replicas are
    known every edge of a kind with more GPUs than a host is priced across hosts."""
    from omniplane.perf.links import HOST_NETWORK_GBS
    from omniplane.plan.inventory_links import with_links

    model = load_model(find_catalog_model("qwen3-omni") or "")
    nodes = (frozenset({"thinker"}), frozenset({"talker"}), frozenset({"code2wav"}))
    opts = [Option("L40S", 2, 32, 0.1), Option("L40S", 1, 32, 0.05), Option("L40S", 1, 32, 0.02)]
    l40s = load_gpus().get("L40S")
    means = {("thinker", "talker"): 1e6, ("talker", "code2wav"): 1e6}
    before = with_links(model, nodes, opts, {"L40S": l40s}, {"L40S": 16}, 8, means)
    placed = with_links(model, nodes, opts, {"L40S": l40s}, {"L40S": 16}, 8, means, (4, 6, 2))
    net = HOST_NETWORK_GBS["pcie"] * 1e9
    assert before[2].link == pytest.approx(1e6 / net)
    assert placed[2].link == pytest.approx(1e6 / l40s.link_bw)  # code2wav's input within the host
    assert placed[0].link == pytest.approx(1e6 / net / 2)  # thinker's output across hosts, tp 2
