"""Capacity planning (omniplane.plan.capacity, omniplane.plan.prices, `plan --rate`)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.errors import InputError
from omniplane.plan.capacity import HEADROOM_GROWS, HEADROOM_GROWTH, Capacity, CapacityPlanner, flow_rate
from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner
from omniplane.plan.prices import Price, costs, load_prices, parse_prices
from omniplane.spec import load_plan
from tests.plan.conftest import problem, table, targets

OPTS = PlannerOptions(mc_samples=32, sim_requests=300, mc_budget=10_000)


def _capacity(rate: float) -> CapacityPlanner:
    tab = table("tiny")
    base = Planner(problem("tiny", 4), options=OPTS, cost=tab.cost, table=tab, targets=targets("tiny"))
    return CapacityPlanner(base, rate, 0.9)


@cache
def _answer(rate: float) -> Capacity:
    return _capacity(rate).run(headroom=False)


@pytest.mark.parametrize("rate", [10.0, 40.0])
def test_bisection_finds_the_smallest_count_that_brute_force_finds(rate: float) -> None:
    cap = _answer(rate)
    assert cap.gpus is not None
    brute = _capacity(rate)  # a fresh planner: every count from 1 up, no bound, no bisection
    first = next(n for n in range(1, cap.gpus + 2) if brute.probe(n).meets)
    assert first == cap.gpus
    assert cap.lower <= cap.gpus
    assert min(cap.attainment.values()) >= 0.9


def test_the_reported_probes_agree_with_the_answer() -> None:
    cap = _answer(40.0)
    assert cap.gpus is not None and cap.gpus_used is not None and cap.gpus_used <= cap.gpus
    for p in cap.probes:  # a count that meets at or above the answer, a miss below it
        assert p.meets == (p.gpus >= cap.gpus), p.to_json()


def test_one_fewer_gpu_misses_on_a_named_type() -> None:
    cap = _answer(40.0)
    fewer = cap.one_fewer
    assert cap.gpus is not None and fewer is not None
    assert fewer.gpus == cap.gpus - 1 and not fewer.meets
    worst = fewer.worst()
    assert worst is not None and fewer.attainment[worst] < 0.9


def test_the_lower_bound_is_never_above_a_count_that_meets() -> None:
    cp = _capacity(40.0)
    lo = cp.lower_bound()
    assert lo >= 2  # 40 req/s cannot fit on one GPU
    assert not cp.probe(lo - 1).meets


def test_headroom_meets_at_or_above_the_rate() -> None:
    cp = _capacity(10.0)
    cap = cp.run()
    assert cap.plan is not None and cap.headroom_rps is not None
    assert cap.headroom_rps >= 10.0
    assert cp.meets_at(cap.plan, cap.headroom_rps)


def test_headroom_stops_at_the_plans_flow_bound() -> None:
    cp = _capacity(10.0)
    cap = cp.run()
    assert cap.gpus is not None and cap.headroom_rps is not None
    pick = cp.probe(cap.gpus).pick
    assert pick is not None
    flow = flow_rate(pick, cp.base.problem.pi())
    assert flow >= 10.0 * (1 - 1e-9)  # the answer carries the rate
    assert cap.headroom_rps <= flow * (1 + 1e-9)


def test_a_sample_meeting_above_the_flow_bound_does_not_raise_the_headroom(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a stand-in simulator that meets at every rate, as a short sample does while batches absorb
    # the excess (module docstring)
    cp = _capacity(10.0)
    monkeypatch.setattr(cp, "meets_at", lambda spec, rate: True)
    spec = object()
    rps, note = cp.headroom(spec, 13.0)  # type: ignore[arg-type]
    assert rps == pytest.approx(13.0) and "flow bound" in note
    assert cp.headroom(spec)[0] == pytest.approx(10.0 * HEADROOM_GROWTH ** HEADROOM_GROWS)  # type: ignore[arg-type]
    assert cp.headroom(spec, 10.0)[0] == pytest.approx(10.0)  # type: ignore[arg-type]


def test_the_catalog_prices_each_carry_a_source_and_date() -> None:
    prices = load_prices()
    assert prices
    for p in prices.values():
        assert p.source.startswith("https://") and p.date and p.usd_per_gpu_hour > 0


def test_a_user_price_file_overrides_and_accepts_a_mapping(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("kind: prices\nprices: {a100: 1.5, H100: 3}\n")
    got = load_prices(f)
    assert got["A100-80GB"].usd_per_gpu_hour == 1.5 and got["H100-SXM"].usd_per_gpu_hour == 3.0
    assert str(f) in got["A100-80GB"].source


@pytest.mark.parametrize(("text", "field"), [
    ("kind: prices\nprices: {a100: -1}\n", "prices.a100"),
    ("kind: prices\nprices: {tpu9: 2}\n", "prices.tpu9"),
    ("kind: prices\nprices:\n  - {gpu: a100, usd_per_gpu_hour: cheap}\n", "prices[0].usd_per_gpu_hour"),
    ("kind: prices\nprices:\n  - {gpu: a100, usd_per_gpu_hour: 1, colour: red}\n", "prices[0].colour"),
    ("kind: gpus\nprices: {a100: 1}\n", "kind"),
    ("prices: []\n", "prices"),
])
def test_a_bad_price_file_names_the_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as exc:
        load_prices(f)
    assert str(f) in str(exc.value) and f"{field}:" in str(exc.value)


def test_the_catalog_format_requires_a_source() -> None:
    with pytest.raises(InputError, match=r"prices\[0\]\.source"):
        parse_prices({"kind": "prices", "prices": [{"gpu": "a100", "usd_per_gpu_hour": 1, "date": "x"}]},
                     "catalog.yaml", user=False)


def test_cost_per_type_splits_the_hourly_cost_by_gpu_seconds() -> None:
    price = Price("A100-80GB", 2.0, "test", "today")
    hourly, per = costs(price, 10, 5.0, {"a": 0.5, "b": 0.5, "c": 0.0}, {"a": 1.0, "b": 3.0, "c": 9.0})
    assert hourly == 20.0
    assert set(per) == {"a", "b"}
    # a gets 1/4 of $20/h over 2.5 req/s x 3600 s; b 3/4
    assert per["a"] == pytest.approx(5.0 / 9000 * 1000)
    assert per["b"] == pytest.approx(3 * per["a"])  # type: ignore[operator]
    assert costs(None, 10, 5.0, {"a": 1.0}, {"a": 1.0}) == (None, {"a": None})


def test_a_bad_prices_option_fails_clearly(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("kind: prices\nprices: {a100: zero}\n")
    res = CliRunner().invoke(app, ["plan", "--model", "qwen-image", "--rate", "1", "--gpu", "H100",
                                   "--prices", str(f)])
    assert res.exit_code != 0
    assert "--prices" in res.output and "prices.a100" in res.output


def test_plan_rate_writes_a_plan_that_sim_run_reproduces(tmp_path: Path) -> None:
    out = tmp_path / "cap.yaml"
    args = ["plan", "--model", "qwen-image", "--rate", "1", "--gpu", "H100", "--mc-budget", "2000",
            "--sim-requests", "300", "--json", "--out", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    cap = doc["capacity"]
    assert cap["gpu"] == "H100-SXM" and cap["rate"] == 1.0 and cap["gpus"] >= 1
    price = load_prices()["H100-SXM"].usd_per_gpu_hour
    assert cap["cost_per_hour"] == pytest.approx(cap["gpus_used"] * price)
    assert set(cap["cost_per_1k_requests"]) == set(cap["attainment"])
    assert cap["one_fewer"]["gpus"] == cap["gpus"] - 1
    assert min(cap["attainment"].values()) >= 0.9
    written = load_plan(out).spec
    assert written.gpus == cap["gpus"] and written.total_gpus == cap["gpus_used"]
    sim = CliRunner().invoke(app, ["sim", "run", str(out), "--rate", "1", "--n", "300", "--json"])
    assert sim.exit_code == 0, sim.output
    got = json.loads(sim.stdout[sim.stdout.index("{"):])
    for t, a in cap["attainment"].items():
        assert got["per_type"][t]["attainment"] == pytest.approx(a, abs=1e-4)


def test_plan_rates_sweeps_and_draws_a_figure(tmp_path: Path) -> None:
    args = ["plan", "--model", "qwen-image", "--rates", "0.5,1", "--gpu", "H100", "--mc-budget", "2000",
            "--sim-requests", "300", "--json", "--figures", str(tmp_path)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    rows = {r["rate"]: r for r in doc["rows"]}
    assert set(rows) == {0.5, 1.0}
    assert rows[0.5]["gpus"] <= rows[1.0]["gpus"]  # more traffic never needs fewer GPUs
    assert [s["rate"] for s in doc["sweep"]] == [0.5, 1.0]
    assert (tmp_path / "capacity-sweep.png").stat().st_size > 0


def test_capacity_options_that_do_not_apply_fail_clearly() -> None:
    res = CliRunner().invoke(app, ["plan", "--model", "qwen-image", "--rate", "1", "--gpus", "4"])
    assert res.exit_code != 0 and "--gpus" in res.output
    res = CliRunner().invoke(app, ["plan", "--model", "qwen-image", "--gpus", "4", "--gpu", "A100,H100"])
    assert res.exit_code != 0 and "--rate" in res.output


def test_objective_cost_picks_the_cheaper_kind_at_the_prices_given(tmp_path: Path) -> None:
    cheap = tmp_path / "p.yaml"
    cheap.write_text("kind: prices\nprices: {A100-80GB: 0.01, H100: 100}\n")
    base = ["plan", "--model", "qwen-image", "--rate", "1", "--gpu", "A100-80GB,H100", "--mc-budget", "2000",
            "--sim-requests", "300", "--json", "--prices", str(cheap)]
    res = CliRunner().invoke(app, [*base, "--objective", "cost"])
    assert res.exit_code == 0, res.output
    by_cost = json.loads(res.stdout[res.stdout.index("{"):])
    rows = {r["gpu"]: r for r in by_cost["rows"]}
    assert rows["A100-80GB"]["gpus"] > rows["H100-SXM"]["gpus"]  # the H100 needs fewer GPUs ...
    assert by_cost["capacity"]["gpu"] == "A100-80GB"  # ... but at these prices the A100 costs less
    assert by_cost["prices"]["A100-80GB"]["source"].startswith("user file")


def test_a_qwen3_omni_capacity_answer_is_a_runtime_plan_that_sim_run_reproduces(tmp_path: Path) -> None:
    from omniplane.spec import find_catalog_model, load_model
    from omniplane.spec.load import load_layout

    out = tmp_path / "cap.yaml"
    args = ["plan", "--model", "qwen3-omni", "--workload", "qwen3-omni-servegen", "--rate", "1", "--gpu",
            "H100", "--mc-budget", "1000", "--sim-requests", "300", "--slo", "5x solo p95", "--json",
            "--out", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    cap = doc["capacity"]
    assert doc["runtime"] == "vllm-omni" and cap["gpus"] is not None
    written = load_plan(out).spec
    assert written.meta["runtime"]["name"] == "vllm-omni" and written.meta["runtime"]["deployable"]
    from omniplane.plan.runtime import pricing_runtime  # priced as `omniplane plan` prices the space

    assert written.meta["runtime"]["priced_with"] == (pricing_runtime("vllm-omni") or "cornserve")
    assert doc["targets_space"].startswith("vllm-omni")  # resolved in the space searched
    assert written.meta["runtime"]["targets_space"] == doc["targets_space"]
    layout = load_layout("qwen3-omni")
    path = find_catalog_model("qwen3-omni")
    assert layout is not None and path is not None
    stages = [set(st.components) for st in layout.stages]
    nodes = [set(n.components) for n in written.nodes]
    for comps in nodes:  # whole stages only
        assert comps == set().union(*(s for s in stages if s & comps))
    # the whole pipeline: every component of the model has a node (vLLM-Omni runs every stage)
    assert set().union(*nodes) == {c.name for c in load_model(path).components}
    sim = CliRunner().invoke(app, ["sim", "run", str(out), "--rate", "1", "--n", "300", "--json"])
    assert sim.exit_code == 0, sim.output
    got = json.loads(sim.stdout[sim.stdout.index("{"):])
    for t, a in cap["attainment"].items():
        assert got["per_type"][t]["attainment"] == pytest.approx(a, abs=1e-4)


def test_the_lower_bound_in_the_runtime_space_is_at_least_the_ideal_one() -> None:
    from omniplane.plan.runtime import runtime_space, setup

    pb = problem("qwen3-omni-servegen", 4)
    tab = table("qwen3-omni-servegen")
    rt = setup("vllm-omni", pb, tab.cost, tab, k_s=2)
    slo = targets("qwen3-omni-servegen")
    ideal = CapacityPlanner(Planner(pb, options=OPTS, cost=tab.cost, table=tab, targets=slo), 3.0, 0.9)
    base = Planner(pb, options=OPTS, cost=tab.cost, table=rt.table, targets=slo)
    real = CapacityPlanner(base, 3.0, 0.9, space=runtime_space(pb.model, 2))
    lo = real.lower_bound()
    assert lo >= ideal.lower_bound() >= 2
    assert not real.probe(lo - 1).meets


def test_runtime_ideal_is_asked_for_and_a_runtime_without_a_pipeline_fails(tmp_path: Path) -> None:
    out = tmp_path / "cap.yaml"
    args = ["plan", "--model", "qwen-image", "--rate", "0.5", "--gpu", "H100", "--mc-budget", "1000",
            "--sim-requests", "200", "--json", "--runtime", "ideal", "--out", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout[res.stdout.index("{"):])["runtime"] == "ideal"
    assert load_plan(out).spec.meta["runtime"]["deployable"] is False
    bad = CliRunner().invoke(app, ["plan", "--model", "qwen3-vl", "--rate", "1", "--gpu", "H100",
                                   "--runtime", "vllm-omni"])
    assert bad.exit_code != 0 and "no pipeline for qwen3-vl" in bad.output


def test_none_found_names_the_closest_count_and_its_binding_type() -> None:
    from omniplane.cli.capacity import _none_found
    from omniplane.plan.capacity import Probe

    probes = [Probe(4, False, {"a": 0.50, "b": 0.95}, "simulated"),
              Probe(8, False, {"a": 0.77, "b": 0.99}, "simulated"),
              Probe(16, False, {"a": 0.76, "b": 0.99}, "simulated"),
              Probe(2, False, {}, "no plan fits")]
    why = _none_found(probes)
    assert why == {"closest_gpus": 8, "type": "a", "attainment": 0.77, "largest_gpus_tried": 16}
    assert _none_found([Probe(2, False, {}, "no plan fits")]) is None


def test_plan_rate_from_a_trace_plans_at_its_busiest_hours_rate(tmp_path: Path) -> None:
    # 0.2 req/s for an hour, then an hour at 1 req/s: the second hour is the busiest
    times = [5.0 * i for i in range(720)] + [3600.0 + i for i in range(3600)] + [9000.0]
    trace = tmp_path / "arrivals.csv"
    trace.write_text("arrival_s\n" + "".join(f"{t}\n" for t in times))
    args = ["plan", "--model", "qwen-image", "--rate-from", str(trace), "--rate-percentile", "50",
            "--gpu", "H100", "--mc-budget", "2000", "--sim-requests", "300", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    got = doc["rate_from"]
    assert got["trace"] == str(trace) and got["percentile"] == 50
    assert (got["hour_start_s"], got["hour_end_s"], got["window_s"]) == (3600, 7200, 3600)
    assert got["rate"] == pytest.approx(1.0) and not got["whole_trace"]
    assert doc["capacity"]["rate"] == got["rate"]  # planned exactly as --rate R
    assert doc["capacity"]["gpus"] >= 1


def test_rate_from_with_rate_or_a_bad_trace_fails_clearly(tmp_path: Path) -> None:
    base = ["plan", "--model", "qwen-image", "--gpu", "H100"]
    res = CliRunner().invoke(app, [*base, "--rate", "1", "--rate-from", "azure-conv"])
    assert res.exit_code != 0 and "--rate-from" in res.output and "not several" in res.output
    res = CliRunner().invoke(app, [*base, "--rate", "1", "--rate-percentile", "90"])
    assert res.exit_code != 0 and "--rate-percentile goes with --rate-from" in res.output
    res = CliRunner().invoke(app, [*base, "--rate-from", str(tmp_path / "nope.csv")])
    assert res.exit_code != 0 and "--rate-from" in res.output and "nope.csv" in res.output
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s\n1\nsoon\n")
    res = CliRunner().invoke(app, [*base, "--rate-from", str(bad)])
    assert res.exit_code != 0 and "bad.csv:3" in res.output and "arrival_s" in res.output
    one = tmp_path / "one.csv"
    one.write_text("arrival_s\n1\n")
    res = CliRunner().invoke(app, [*base, "--rate-from", str(one)])
    assert res.exit_code != 0 and "one.csv" in res.output and "at least two arrivals" in res.output
