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
    # the cheapest meeting candidate: no simulated candidate that also met costs less
    met = [c for c in inv["simulated"] if min(c["attainment"].values()) >= 0.9]
    assert pick["cost_per_hour"] == min(c["cost_per_hour"] for c in met)
    assert {s["gpu"] for s in inv["single_kind"]} == set(counts)
    spec = load_plan(out).spec
    assert spec.gpus_by_kind() == pick["gpus"]
    assert spec.slo is not None and spec.meta["runtime"]["priced_with"] == "vllm-v1"
