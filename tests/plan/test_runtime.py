"""Runtime profiles (omniplane.plan.runtime): the vLLM-Omni space holds only what vLLM-Omni 0.30
can run, sized as it loads it; the ideal space is labelled not deployable."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.perf import CostModel, ExecutorConfig, InfeasibleConfig
from omniplane.plan.costs import CostTable
from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner
from omniplane.plan.runtime import (
    SHARING,
    RuntimeUnavailable,
    default_runtime,
    groupings,
    label,
    mark_shared,
    pricing_runtime,
    runtime_space,
    set_partitions,
    setup,
    stage_fit,
)
from omniplane.spec import PlanSpec, find_catalog_model, load_gpus, load_model
from omniplane.spec.load import load_layout
from tests.plan.conftest import problem, targets

runner = CliRunner()
LAYOUT_MODELS = ("qwen3-omni", "qwen2.5-omni", "bagel", "mimo-audio", "qwen-image")


def _model(name: str):  # type: ignore[no-untyped-def]
    path = find_catalog_model(name)
    assert path is not None
    return load_model(path)


@pytest.mark.parametrize("name", LAYOUT_MODELS)
def test_every_deployment_is_the_whole_pipeline_of_whole_stages(name: str) -> None:
    model = _model(name)
    layout = load_layout(name)
    assert layout is not None
    stages = [frozenset(st.components) for st in layout.stages]
    everything = frozenset(c.name for c in model.components)
    space = runtime_space(model, k_s=2)
    assert space.logical
    for lp in space.logical:
        for sp in lp.subplans:
            assert frozenset().union(*sp.nodes) == everything  # every stage in every deployment
            for node in sp.nodes:  # a node is a union of whole stages
                assert node == frozenset().union(*(s for s in stages if s & node))
            # every type runs to its final stage inside each deployment
            assert sp.covered == frozenset(range(len(model.type_names)))
    # each stage alone is always one of the groupings
    assert any(set(sp.nodes) == set(stages) for lp in space.logical for sp in lp.subplans)


def test_qwen3_omni_groups_its_stages_on_shared_gpus_every_way_an_executor_type_hosts() -> None:
    space = runtime_space(_model("qwen3-omni"), k_s=2)
    assert space.logical is not None
    shapes = {tuple(sorted(len(n) for n in lp.subplans[0].nodes)) for lp in space.logical}
    # thinker stage (4 components) | talker | code2wav; thinker+talker | code2wav; thinker | talker+code2wav;
    # all on one GPU (thinker+code2wav with the talker apart has no executor type)
    assert shapes == {(1, 1, 4), (1, 5), (2, 4), (6,)}
    assert len(space.logical) == 4 + 10  # 4 single deployments + 10 pairs
    assert "separate processes" in space.approximation and "time-sliced" in space.approximation


def test_set_partitions_are_every_grouping_once() -> None:
    parts = set_partitions([0, 1, 2])
    assert len(parts) == 5  # Bell(3)
    assert len({frozenset(frozenset(b) for b in p) for p in parts}) == 5
    assert all(sorted(i for b in p for i in b) == [0, 1, 2] for p in parts)
    assert len(set_partitions([0, 1, 2, 3])) == 15


def test_groupings_whose_stages_do_not_fit_one_gpu_are_not_searched() -> None:
    """Qwen3-Omni on one H100-80GB: its thinker stage fits at TP 1, but not with the talker and
    code2wav on the same GPU; on the 96 GB RTX PRO 6000 the whole pipeline fits one GPU."""
    model = _model("qwen3-omni")
    layout = load_layout("qwen3-omni")
    assert layout is not None
    whole = frozenset(c.name for c in model.components)
    for gpu, fits_one in (("H100-SXM", False), ("RTXPRO6000", True)):
        pb = replace(problem("qwen3-omni-servegen", 1), gpu=load_gpus().get(gpu))
        cost = CostModel(pb.model)
        rt = setup("vllm-omni", pb, cost, CostTable(pb, cost), k_s=1)
        tp1 = [tp for tp, _ in rt.table.node(whole).options if tp == 1]
        assert bool(tp1) == fits_one
        assert rt.space.logical is not None
        for lp in rt.space.logical:  # every node of every grouping searched has a feasible config
            assert all(rt.table.node(n).options for sp in lp.subplans for n in sp.nodes)
        assert len(rt.space.logical) == len(groupings(model, layout))  # k_s 1: each grouping fits somehow


def test_a_one_gpu_plan_puts_every_stage_on_it_and_says_how_they_share_it() -> None:
    pb = replace(problem("qwen2.5-omni-horizon", 1), gpu=load_gpus().get("H100-SXM"))
    cost = CostModel(pb.model)
    rt = setup("vllm-omni", pb, cost, CostTable(pb, cost), k_s=2)
    planner = Planner(pb, options=PlannerOptions(sim_requests=60, max_simulated=2, mc_samples=24), cost=cost,
                      table=rt.table, targets=targets("qwen2.5-omni-horizon"))
    found = planner.run(rt.space)
    assert found.best is not None and found.best.spec is not None
    spec = mark_shared(found.best.spec, pb.model)
    assert len(spec.nodes) == 1 and spec.nodes[0].gpus == 1
    assert set(spec.nodes[0].components) == {c.name for c in pb.model.components}
    assert spec.nodes[0].sharing == SHARING == "timeslice"
    assert spec.nodes[0].policy is None  # vLLM-Omni's own scheduler, the one priced
    again = PlanSpec.model_validate(spec.model_dump(mode="json"))  # the field round-trips
    assert again.nodes[0].sharing == "timeslice"
    with pytest.raises(ValueError, match="sharing"):
        PlanSpec.model_validate({**spec.model_dump(mode="json"),
                                 "nodes": [{**spec.nodes[0].model_dump(mode="json"), "sharing": "smt"}]})


def test_stages_sharing_a_gpu_cost_more_than_each_alone_on_its_own() -> None:
    """Time-sliced stages take turns: per request the shared GPU spends at least what each
    stage spends on its own GPU, and, for a request through several stages, more."""
    pb = replace(problem("qwen2.5-omni-horizon", 1), gpu=load_gpus().get("H100-SXM"))
    cost = CostModel(pb.model)
    rt = setup("vllm-omni", pb, cost, CostTable(pb, cost), k_s=1)
    layout = load_layout("qwen2.5-omni")
    assert layout is not None
    stages = [frozenset(st.components) for st in layout.stages]
    shared = rt.table.node(frozenset().union(*stages))
    for st in stages:
        alone = rt.table.node(st)
        for (tp, b), row in zip(shared.options, shared.s_full, strict=True):
            o = alone.options.index((tp, b)) if (tp, b) in alone.options else None
            if o is None:
                continue
            assert (row >= alone.s_full[o] - 1e-12).all()
            others = set().union(*stages) - st
            through = [t for t, name in enumerate(pb.types) if set(pb.model.path_of(name)) & others]
            assert all(row[t] > alone.s_full[o][t] for t in through)


def test_default_runtime_per_model_and_no_pipeline_is_a_clear_error() -> None:
    for name in LAYOUT_MODELS:
        assert default_runtime(_model(name)) == "vllm-omni"
    vl = _model("qwen3-vl")
    assert default_runtime(vl) == "ideal"
    with pytest.raises(RuntimeUnavailable, match="no pipeline for qwen3-vl"):
        runtime_space(vl)
    result = runner.invoke(app, ["plan", "--model", "qwen3-vl", "--gpus", "2", "--runtime", "vllm-omni"])
    assert result.exit_code != 0 and "no pipeline for qwen3-vl" in result.output
    ideal = label(_model("qwen3-omni"), "ideal")
    assert ideal["deployable"] is False and "not deployable" in ideal["why"]


THINKER_STAGE = ("audio_encoder", "image_encoder", "video_encoder", "thinker")


def test_an_oversize_stage_is_never_offered() -> None:
    """The thinker stage loads every encoder: about 59 GiB at TP 1, over a 24 GB GPU (and a 48 GB
    L40S); only TP degrees where weights, reserve and KV of one sequence fit are offered."""
    pb = problem("qwen3-omni-servegen", 4)
    l40s = load_gpus().get("L40S")
    small = l40s.model_copy(update={"name": "24GB", "memory_gb": 24.0})
    fit = stage_fit(pb.model, pb.workload, pb.mix)
    with pytest.raises(InfeasibleConfig, match="does not fit on 24GB"):
        fit(THINKER_STAGE, ExecutorConfig(small, 1, 1))
    with pytest.raises(InfeasibleConfig, match="whole vLLM-Omni stages"):
        fit(("thinker",), ExecutorConfig(small, 4, 32))
    cost = CostModel(pb.model)
    for gpu, smallest_tp in ((small, None), (l40s, 2)):
        table = CostTable(replace(pb, gpu=gpu), cost, fit=fit)
        node = table.node(THINKER_STAGE)
        assert any(i.tp == 1 for i in node.infeasible)
        if smallest_tp is None:
            assert node.options == ()  # never searched, never emitted
        else:
            assert node.options and min(tp for tp, _ in node.options) == smallest_tp


def test_the_max_batch_fits_at_the_mean_context() -> None:
    """On an A100-80GB the thinker stage at TP 1 holds fewer sequences than the type's smallest
    grid batch (32): the table offers the largest max batch it holds, and never a larger one."""
    pb = problem("qwen3-omni-servegen", 4)
    fit = stage_fit(pb.model, pb.workload, pb.mix)
    table = CostTable(pb, CostModel(pb.model), fit=fit)
    node = table.node(THINKER_STAGE)
    tp1 = [b for tp, b in node.options if tp == 1]
    assert len(tp1) == 1 and 1 <= tp1[0] < 32
    with pytest.raises(InfeasibleConfig, match="mean context"):
        fit(THINKER_STAGE, ExecutorConfig(pb.gpu, 1, tp1[0] + 1))


def test_a_runtime_plan_is_whole_stages_and_never_below_the_stock_layout() -> None:
    pb = problem("qwen3-omni-servegen", 4)
    cost = CostModel(pb.model)
    ideal = CostTable(pb, cost)
    rt = setup("vllm-omni", pb, cost, ideal, k_s=2)
    planner = Planner(pb, cost=cost, table=rt.table, targets=targets("qwen3-omni-servegen"))
    from omniplane.plan.compare import compare

    cmp = compare(planner, baselines=rt.baselines, space=rt.space)
    assert [e.name for e in cmp.baselines] == ["vllm-omni"]
    assert cmp.planner.spec is not None
    assert cmp.planner.total >= cmp.baselines[0].total - 1e-9
    layout = load_layout("qwen3-omni")
    assert layout is not None
    stages = [set(st.components) for st in layout.stages]
    for node in cmp.planner.spec.nodes:
        comps = set(node.components)
        assert comps == set().union(*(s for s in stages if s & comps))


def test_plan_reports_the_runtime_and_the_comparison(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "plan.yaml"
    result = runner.invoke(app, ["plan", "--model", "qwen3-omni", "--gpus", "2", "--sim-requests", "80",
                                 "--max-simulated", "2", "--mc-samples", "24", "--compare-ideal", "--json",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rt = doc["runtime"]
    assert rt["name"] == "vllm-omni" and rt["deployable"] is True
    assert rt["priced_with"] == "vllm-v1"  # vLLM-Omni's plans are priced by the runtime it runs
    assert set(doc["baselines"]) == {"vllm-omni"}
    assert rt["pick_rps"] == pytest.approx(doc["goodput"]["total"])
    assert rt["stock_replicated_rps"] == pytest.approx(doc["baselines"]["vllm-omni"])
    assert rt["ideal_rps"] > 0 and rt["runtime_over_ideal"] == pytest.approx(rt["pick_rps"] / rt["ideal_rps"])
    # the targets were resolved in vLLM-Omni's space, and the ideal search was scored at them
    assert rt["targets_space"].startswith("vllm-omni") and rt["targets_space"] in rt["ideal_scored_at"]
    assert all(how.endswith("in the vllm-omni-runtime space") for how in doc["plan"]["slo"]["how"].values())
    assert "runtime" in doc["plan"]["meta"]
    # memory as vLLM-Omni loads it: every stage fits, and holds its max batch at the mean context
    for row in doc["memory"]["nodes"]:
        assert "error" not in row, row
        for dev in row["devices"].values():
            for st in dev["stages"]:
                if "seqs_fit" in st:
                    assert st["seqs_fit"]["mean"] >= st["max_batch"]
    text = runner.invoke(app, ["plan", "--model", "qwen3-omni", "--gpus", "2", "--sim-requests", "80",
                               "--max-simulated", "2", "--mc-samples", "24", "--runtime", "ideal"])
    assert text.exit_code == 0, text.output
    assert "not deployable on any runtime omniplane supports" in text.output


def test_only_baselines_inside_the_runtime_space_may_seed_the_pick() -> None:
    from omniplane.plan.baselines import full_disaggregation, monolithic, vllm_omni
    from omniplane.plan.compare import within
    from omniplane.plan.space import FULL

    model = _model("qwen3-omni")
    space = runtime_space(model, k_s=2)
    stock, mono, disagg = vllm_omni(model), monolithic(model), full_disaggregation(model)
    assert stock is not None and mono is not None and disagg is not None
    assert within(stock, space) and within(stock, FULL) and within(mono, FULL)
    assert within(mono, space)  # every stage on one GPU is now a grouping of the space
    assert not within(disagg, space)


def test_the_plan_file_says_which_runtime_it_was_planned_for(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from omniplane.spec import load_plan

    out = tmp_path / "plan.yaml"
    result = runner.invoke(app, ["plan", "--model", "qwen3-omni", "--gpus", "2", "--sim-requests", "80",
                                 "--max-simulated", "2", "--mc-samples", "24", "--runtime", "ideal",
                                 "--no-baselines", "--out", str(out)])
    assert result.exit_code == 0, result.output
    meta = load_plan(out).spec.meta or {}
    assert meta["runtime"]["name"] == "ideal" and meta["runtime"]["deployable"] is False
    assert meta["runtime"]["priced_with"] == "cornserve"  # the reproduction's stack, unchanged
    assert meta["runtime"]["targets_space"].startswith("ideal")
    assert "whole pipeline" in meta["runtime"]["why"]


def test_a_shared_gpu_node_simulates_one_process_per_stage_on_one_gpu_slot() -> None:
    from omniplane.sim.build import build_topology
    from omniplane.sim.eventloop import EventLoop
    from omniplane.sim.gpu import TimeSliced
    from omniplane.sim.processes import Processes

    model = _model("qwen2.5-omni")
    layout = load_layout("qwen2.5-omni")
    assert layout is not None
    comps = [c.name for c in model.components]
    doc = {"kind": "plan", "model": model.name, "gpu": "H100-SXM", "gpus": 1,
           "nodes": [{"name": "all", "components": comps,
                      "executors": [{"count": 1, "tp": 1, "max_batch": 8}]}],
           "routes": {t: [{"nodes": ["all"], "p": 1.0}] for t in model.type_names}}
    merged = build_topology(model, PlanSpec.model_validate(doc), load_gpus().get("H100-SXM"),
                            CostModel(model), EventLoop())
    assert len(merged.executors) == 1 and merged.executors[0].gpu is None
    doc["nodes"][0]["sharing"] = "timeslice"
    topo = build_topology(model, PlanSpec.model_validate(doc), load_gpus().get("H100-SXM"), CostModel(model),
                          EventLoop())
    assert len(topo.executors) == len(layout.stages)  # one process per stage
    slots = {id(ex.gpu) for ex in topo.executors}
    assert len(slots) == 1 and isinstance(topo.executors[0].gpu, TimeSliced)
    for ex in topo.executors:  # each process runs exactly one stage's components
        assert {layout.stage_of(c).stage_id for c in ex.by_comp} == {int(ex.name.rsplit(":", 1)[1])}
    seat = topo.nodes["all"].groups[0].executors[0]
    assert isinstance(seat, Processes) and set(seat.by_comp) == set(comps)


def test_stage_processes_sharing_one_gpu_are_slower_than_each_stage_on_its_own_gpu() -> None:
    """Simulated, same requests: the three stages time-sliced on one H100 answer later than each
    on its own H100, and sooner than the same stages taking turns in one executor (no overlap of
    one stage's host time with another's GPU time)."""
    from omniplane.plan.refine import SampleRunner

    pb = replace(problem("qwen2.5-omni-horizon", 3, samples=8), gpu=load_gpus().get("H100-SXM"))
    layout = load_layout("qwen2.5-omni")
    assert layout is not None
    model = pb.model
    groups = [list(st.components) for st in layout.stages]

    def ex(cs: list[str]) -> list[dict[str, int]]:  # the vocoder's grid stops at 8
        return [{"count": 1, "tp": 1, "max_batch": 8 if cs == ["token2wav"] else 64}]

    def plan(nodes: list[list[str]], sharing: str | None) -> PlanSpec:
        names = ["n" + str(i) for i in range(len(nodes))]
        routes = {t: [{"nodes": [n for n, cs in zip(names, nodes, strict=True)
                                 if set(cs) & set(model.path_of(t))], "p": 1.0}] for t in model.type_names}
        return PlanSpec.model_validate({
            "kind": "plan", "model": model.name, "gpu": "H100-SXM", "gpus": len(nodes), "routes": routes,
            "nodes": [{"name": n, "components": cs, "executors": ex(cs),
                       **({"sharing": sharing} if sharing else {})}
                      for n, cs in zip(names, nodes, strict=True)]})

    tg = targets("qwen2.5-omni-horizon")
    sim = SampleRunner(pb.workload, pb.mix, 120, 0, CostModel(model), load_gpus(), tg.seconds)
    every = [c for cs in groups for c in cs]

    def latency(spec: PlanSpec) -> float:  # mean first-response latency over the requests answered
        lat = np.concatenate(sim.run(spec, 6.0).latencies)
        return float(lat[np.isfinite(lat)].mean())

    alone, sliced = latency(plan(groups, None)), latency(plan([every], "timeslice"))
    assert alone < sliced < latency(plan([every], None))
def test_each_space_is_priced_by_its_runtime_and_the_prices_differ() -> None:
    model = _model("qwen3-omni")
    gpu = load_gpus().get("A100-80GB")
    omni = CostModel(model, runtime=pricing_runtime("vllm-omni"))
    ideal = CostModel(model, runtime=pricing_runtime("ideal"))
    assert (omni.runtime.name, ideal.runtime.name) == ("vllm-v1", "cornserve")
    cfg = ExecutorConfig(gpu, 1, 64)
    # CUDA-graph decode and the CI-fitted talker: a talker frame is cheaper than under eager Cornserve
    frame = {c.runtime.name: c.decode_step_time("talker", cfg, 8, 8 * 1000) for c in (omni, ideal)}
    assert frame["vllm-v1"] < frame["cornserve"]


def test_a_logical_plan_the_estimate_prices_at_zero_is_still_simulated() -> None:
    """Qwen2.5-Omni on 2 H100 at vllm-v1 prices: the estimate (stages taking turns) scores every
    plan with all three stages on one GPU at zero; the search simulates that logical plan's
    highest-flow plan anyway (Search._simulate_unpriced), and the simulator finds it the best."""
    from omniplane.plan.problem import make_problem
    from omniplane.plan.runtime import pricing_runtime, setup
    from omniplane.slo.resolve import space_targets
    from omniplane.spec import find_catalog_workload, load_workload

    wl = load_workload(find_catalog_workload("qwen2.5-omni-horizon"))
    pb = make_problem(wl, load_gpus().get("H100"), 2, samples=64)
    cost = CostModel(pb.model, runtime=pricing_runtime("vllm-omni"))
    rt = setup("vllm-omni", pb, cost, CostTable(pb, cost), 2)
    planner = Planner(pb, options=PlannerOptions(sim_requests=150, mc_samples=64), cost=cost, table=rt.table,
                      targets=space_targets(rt, wl.spec.slo))
    res = planner.run(rt.space)
    unpriced = [s for s in res.simulated if float(np.sum(s.estimate)) == 0.0]
    assert unpriced, "no zero-estimate plan was simulated"
    best = max(res.simulated, key=lambda s: float(s.outcome.goodput.sum()))
    assert res.total == pytest.approx(float(best.outcome.goodput.sum()))
    priced = [s for s in res.simulated if float(np.sum(s.estimate)) > 0.0]
    assert max(float(s.outcome.goodput.sum()) for s in unpriced) > max(
        (float(s.outcome.goodput.sum()) for s in priced), default=0.0)
