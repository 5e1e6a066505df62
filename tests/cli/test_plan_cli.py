"""``omniplane plan`` and ``omniplane plan show``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.spec import load_plan

runner = CliRunner()
SMALL = ["--model", "qwen3-vl", "--gpus", "2", "--sim-requests", "80", "--max-simulated", "2",
         "--mc-samples", "24"]


def test_json_has_exactly_the_issue_keys_and_writes_the_plan(tmp_path: Path) -> None:
    out = tmp_path / "plan.yaml"
    figs = tmp_path / "figs"
    result = runner.invoke(app, ["plan", *SMALL, "--json", "--out", str(out), "--figures", str(figs)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {"plan", "goodput", "baselines", "counts", "estimate_error", "cuts", "baseline_cuts",
                        "phases", "seconds", "memory", "runtime"}
    assert "no vLLM-Omni layout for qwen3-vl" in doc["memory"]["note"]
    # no vLLM-Omni pipeline: the default runtime is ideal, and the plan says it is not deployable
    assert doc["runtime"]["name"] == "ideal" and doc["runtime"]["deployable"] is False
    assert "no pipeline for qwen3-vl" in doc["runtime"]["why"]
    assert doc["plan"]["meta"]["runtime"] == doc["runtime"]  # tests/deploy/test_memory_table.py
    assert set(doc["goodput"]) == {"total", "per_type"}
    assert set(doc["goodput"]["per_type"]) == {"t2t", "ti2t"}
    counts = doc["counts"]
    assert set(counts) == {"raw_space", "built", "flow", "monte_carlo", "simulated"}
    assert counts["raw_space"] >= counts["flow"] >= counts["monte_carlo"] >= counts["simulated"] >= 1
    assert counts["built"] >= counts["flow"]
    err = doc["estimate_error"]
    assert set(err) == {"mean_abs_total", "plans", "baselines"} and len(err["plans"]) == counts["simulated"]
    # every baseline that found a plan has its error (ModServe's TP 4 and EPD's three nodes do not fit 2 GPUs)
    found = {b for b, total in doc["baselines"].items() if total > 0}
    assert found <= set(err["baselines"]) <= set(doc["baselines"])
    errs = [abs(p["error"]) for p in err["plans"] if math.isfinite(p["error"])]
    assert err["mean_abs_total"] == pytest.approx(sum(errs) / len(errs))
    # --max-simulated 2 is a budget: when it dropped survivors, the cut is listed
    assert all({"phase", "rule", "kind", "count", "unit"} <= set(c) for c in doc["cuts"])
    assert all(c["kind"] in ("heuristic", "budget") for c in doc["cuts"])
    assert set(doc["baseline_cuts"]) == set(doc["baselines"])
    assert all({"phase", "rule", "kind", "count", "unit"} <= set(c) and c["kind"] in ("heuristic", "budget")
               for cuts in doc["baseline_cuts"].values() for c in cuts)
    assert set(doc["phases"]) == {"enumerate", "flow", "monte_carlo", "simulate"}
    for phase in doc["phases"].values():
        assert set(phase) == {"count", "seconds"}
    assert set(doc["baselines"]) == {"vllm", "full-disaggregation", "epd", "modserve"}
    assert doc["plan"]["kind"] == "plan" and doc["seconds"] > 0
    assert abs(doc["goodput"]["total"] - sum(doc["goodput"]["per_type"].values())) < 1e-9
    plan = load_plan(out)  # the file is a valid plan the simulator can load
    assert plan.spec.total_gpus <= 2
    # the file says what it was made for, in its typed fields: the prediction is the document's
    # goodput (no --sweep: the pipeline's own run at alpha x R_d), the targets cover every type
    pred, slo = plan.spec.prediction, plan.spec.slo
    assert pred is not None and slo is not None
    assert pred.workload == "qwen3-vl-servegen" and pred.requests == 80 and pred.seed == 0
    assert pred.goodput_rps.total == pytest.approx(doc["goodput"]["total"], abs=1e-4)
    assert pred.goodput_rps.per_type == pytest.approx(doc["goodput"]["per_type"], abs=1e-4)
    assert 0 < pred.goodput_rps.total <= pred.offered_rps * (1 + 1e-6)  # goodput never exceeds the offer
    assert set(slo.targets_ms) == {"t2t", "ti2t"} and slo.describe() == "isolated p25"
    assert doc["plan"]["slo"]["targets_ms"] == pytest.approx(slo.targets_ms)
    shown = runner.invoke(app, ["plan", "show", str(out)])
    assert shown.exit_code == 0 and "latency targets (isolated p25)" in shown.output
    assert f"predicted goodput {pred.goodput_rps.total:.2f} req/s" in shown.output
    dry = runner.invoke(app, ["deploy", str(out), "--dry-run", "--json"])  # what the ingress will say
    assert dry.exit_code == 0 and json.loads(dry.stdout)["slo_ms"] == slo.targets_ms
    assert sorted(p.name for p in figs.glob("*.png")) == sorted(
        f"qwen3-vl-2xA100-80GB-{k}.png" for k in ("fig7-pruning", "fig8-baselines", "fig9-goodput-vs-target"))


def test_show_draws_nodes_executors_gpus_and_routes() -> None:
    path = "src/omniplane/catalog/plans/qwen3-omni-16xa100-cornfigurator.yaml"
    result = runner.invoke(app, ["plan", "show", path])
    assert result.exit_code == 0, result.output
    for text in ("front", "11 x (tp 1, max batch 64)", "16 of 16", "aud -> front -> back"):
        assert text in result.output


def test_bad_input_fails_with_a_clear_message() -> None:
    result = runner.invoke(app, ["plan", "--model", "qwen3-vl", "--gpus", "2", "--slo", "zz=1s"])
    assert result.exit_code == 2
    assert "--slo 'zz=1s': unknown request type 'zz' (expected one of: t2t, ti2t)" in result.output
    result = runner.invoke(app, ["plan", "--model", "qwen3-vl", "--gpus", "2", "--slo", "ti2t=800"])
    assert result.exit_code == 2 and "'800' needs a unit: 800ms or 800s" in result.output
    result = runner.invoke(app, ["plan", "--model", "qwen3-vl", "--gpus", "2", "--slo", "plan"])
    assert result.exit_code == 2 and "--slo plan: planning writes a plan's targets" in result.output
    result = runner.invoke(app, ["plan", "--gpus", "2"])
    assert result.exit_code == 2 and "--model" in result.output
    result = runner.invoke(app, ["plan", "show", "nope.yaml"])
    assert result.exit_code == 2


def test_default_workload_is_the_models_base_workload_not_a_variant() -> None:
    from omniplane.cli.plan import _workload

    # qwen3-omni has the base mix and a 2/3-audio variant that sorts first alphabetically
    assert _workload("qwen3-omni", None).stem == "qwen3-omni-servegen"
    assert _workload("qwen3-vl", None).stem == "qwen3-vl-servegen"
