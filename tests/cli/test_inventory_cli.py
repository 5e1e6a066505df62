"""``omniplane plan --inventory``: bad input is refused before any planning, naming what was expected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.spec import load_plan

runner = CliRunner()


@pytest.mark.parametrize(("args", "says"), [
    (["--inventory", "H100:7"], "not whole hosts of --host-gpus 8"),
    (["--inventory", "H100:8", "--host-gpus", "3"], "not whole hosts of --host-gpus 3"),
    (["--inventory", "B300:8"], "unknown GPU kind 'B300'"),
    (["--inventory", "H100"], "expected KIND:COUNT"),
    (["--inventory", "H100:8", "--gpus", "8"], "leave --gpus"),
    (["--inventory", "H100:8", "--runtime", "ideal"], "vLLM-Omni's space"),
])
def test_a_bad_inventory_is_refused_with_what_was_expected(args: list[str], says: str) -> None:
    res = runner.invoke(app, ["plan", "--model", "qwen3-omni", *args])
    assert res.exit_code != 0
    assert says in " ".join(res.output.split())


def test_a_rate_picks_a_subset_within_the_counts_and_writes_its_plan_with_targets_and_pricing(
        tmp_path: Path) -> None:
    out = tmp_path / "p.yaml"
    res = runner.invoke(app, ["plan", "--model", "qwen3-omni", "--workload", "qwen3-omni-servegen",
                              "--inventory", "H100:8,L40S:16", "--rate", "20", "--slo", "5x solo p95",
                              "--sim-requests", "200", "--mc-budget", "500", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    inv = json.loads(res.stdout)["inventory"]
    counts = {"H100-SXM": 8, "L40S": 16}
    assert inv["counts"] == counts
    pick = inv["pick"]
    assert all(pick["gpus"][k] <= counts[k] for k in pick["gpus"])
    assert min(pick["attainment"].values()) >= 0.9  # the pick meets every type at the rate
    # no simulated candidate that also met costs less (the descent may have found a cheaper one)
    met = [c for c in inv["simulated"] if min(c["attainment"].values()) >= 0.9]
    assert pick["cost_per_hour"] <= min(c["cost_per_hour"] for c in met)
    assert {s["gpu"] for s in inv["single_kind"]} == set(counts)
    # the evidence of minimality: one GPU fewer of each of the pick's kinds, simulated at the rate, misses
    assert [r["gpu"] for r in inv["one_fewer"]] == list(pick["gpus"])
    for r in inv["one_fewer"]:
        assert r["gpus"] == {**pick["gpus"], r["gpu"]: pick["gpus"][r["gpu"]] - 1}
        if r["plan"] is None:
            assert r["reason"].startswith("no plan")
            continue
        assert r["simulated_at_rps"] == 20.0
        assert r["used"][r["gpu"]] < pick["gpus"][r["gpu"]]
        # it misses, or its flow balance does not carry the rate (met on the sample only)
        assert (r["misses"] is not None and r["attainment"][r["misses"]] < 0.9) or r["reason"].startswith(
            "flow bound: carries")
    assert pick["flow_rps"] >= 20.0 * (1 - 1e-9)  # the pick's flow balance carries the rate
    spec = load_plan(out).spec
    assert spec.gpus_by_kind() == pick["gpus"]
    assert spec.slo is not None and spec.meta["runtime"]["priced_with"] == "vllm-v1"


def test_both_a_rate_and_rates_are_refused() -> None:
    res = runner.invoke(app, ["plan", "--model", "qwen3-omni", "--inventory", "H100:8", "--rate", "5",
                              "--rates", "5,10"])
    assert res.exit_code != 0
    assert "not both" in " ".join(res.output.split())


def test_a_rate_sweep_gives_the_inventory_and_each_kind_alone_within_its_count(tmp_path: Path) -> None:
    figs = tmp_path / "figs"
    res = runner.invoke(app, ["plan", "--model", "qwen3-omni", "--workload", "qwen3-omni-servegen",
                              "--inventory", "H100:8,L40S:16", "--rates", "10,40", "--slo", "5x solo p95",
                              "--sim-requests", "200", "--mc-budget", "500", "--json",
                              "--figures", str(figs)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)["inventory_sweep"]
    counts = {"H100-SXM": 8, "L40S": 16}
    rows = doc["rows"]
    assert {(r["rate"], r["gpu"]) for r in rows} == {(r, k) for r in (10.0, 40.0)
                                                     for k in ("inventory (mixed)", *counts)}
    for r in rows:
        if r["gpus"] is None:  # said why, not left blank
            assert "within the inventory: " in r["note"]
            continue
        assert all(n <= counts[k] for k, n in r["gpus_by_kind"].items())  # within the inventory
        assert sum(r["gpus_by_kind"].values()) == r["gpus"]
        assert min(r["attainment"].values()) >= 0.9
    mixed = {r["rate"]: r for r in rows if r["gpu"] == "inventory (mixed)"}
    assert mixed[10.0]["gpus"] is not None and mixed[40.0]["gpus"] is not None
    assert mixed[40.0]["cost_per_hour"] >= mixed[10.0]["cost_per_hour"]  # more load, no cheaper subset
    # the L40S alone cannot carry 40 req/s within 16 GPUs (its thinker is 8x the H100's GPU-seconds)
    assert next(r for r in rows if r["rate"] == 40.0 and r["gpu"] == "L40S")["gpus"] is None
    assert doc["figures"] and (figs / "inventory-sweep.png").stat().st_size > 0
