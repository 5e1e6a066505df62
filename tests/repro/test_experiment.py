"""A small end-to-end experiment: the testbed, a short sweep, its JSON, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.repro.horizon.experiment import (
    SingleGPU,
    SweepSpec,
    deployment,
    mix_for,
    run_sweep,
    single_gpu,
    sweep_json,
)
from omniplane.repro.validation.colocation import default_sweep_path
from omniplane.sched.calibration import capacity_cap
from omniplane.spec import load_gpus, load_model, resolve_plan


@pytest.fixture(scope="module")
def testbed() -> SingleGPU:
    return single_gpu("qwen2.5-omni", "rtx6000ada", 1)  # shared with the sweep and the CLI runs


@pytest.mark.parametrize("model", ["qwen2.5-omni", "mimo-audio", "bagel"])
def test_deployment_is_a_valid_two_stage_plan(model: str) -> None:
    m = load_model(model)
    plan = deployment(m, load_gpus().get("RTX6000Ada"))
    resolved = resolve_plan(plan, m, load_gpus())  # raises on an invalid plan
    stage0 = resolved.spec.nodes[0].components
    assert m.shared_stage() in stage0 and [n.name for n in resolved.spec.nodes] == ["stage0", "stage1"]
    mix = mix_for(m, 0.3)
    assert sum(mix.values()) == pytest.approx(1.0)
    assert sum(v for t, v in mix.items() if t in m.long_types()) == pytest.approx(0.3)


def test_every_request_is_accounted_for_under_each_policy(testbed: SingleGPU) -> None:
    for name in ("horizon", "vanilla", "edf-mps"):
        r = testbed.run(name, rate=0.4, long_fraction=0.5, n=30, seed=3)
        assert r.arrived == 30 and 0.0 <= r.attainment <= 1.0
        assert set(r.p95_ms) <= set(testbed.model.type_names)
        assert r.shared_tpot_ms["p50"] > 0


def test_the_shipped_baselines_run_in_the_testbed(testbed: SingleGPU) -> None:
    """static-cap's cap comes from the calibration's sweep (a partition size below the whole GPU);
    priority and static-cap account for every request like the other policies."""
    cap = capacity_cap(testbed.calibration.sweep)
    assert cap in {p.sms for p in testbed.calibration.sweep} and cap < testbed.gpu.sms
    for name in ("static-cap", "priority"):
        r = testbed.run(name, rate=0.4, long_fraction=0.5, n=30, seed=3)
        assert r.arrived == 30 and 0.0 <= r.attainment <= 1.0 and r.policy == name


def test_windowed_attainment_counts_only_completions_inside_the_window(testbed: SingleGPU) -> None:
    """The paper's measure: met / completed within the window; a window ending before the
    backlog clears completes fewer requests, and a window past the drain equals the drained
    figure (every request completed, none failed)."""
    short = testbed.run("vanilla", rate=2.0, long_fraction=0.3, n=40, seed=2, window_s=10.0)
    long = testbed.run("vanilla", rate=2.0, long_fraction=0.3, n=40, seed=2, window_s=1e9)
    assert short.completed_window < long.completed_window == long.arrived == 40
    assert long.attainment_window == pytest.approx(long.attainment)
    assert short.attainment == long.attainment  # the drained figure ignores the window
    assert 0.0 <= short.attainment_window <= 1.0


def test_horizon_records_its_control_loop(testbed: SingleGPU) -> None:
    r = testbed.run("horizon", rate=0.4, long_fraction=0.6, n=25, seed=1, record=True)
    caps = {row[4] for row in r.trace}
    levels = set(testbed.calibration.ladder.levels)
    assert caps <= levels | {testbed.calibration.ladder.s_aggr} and caps & levels
    assert all(row[4] in levels for row in r.trace if row[1] > 0)


def test_sweep_json_has_the_documented_shape(testbed: SingleGPU) -> None:
    spec = SweepSpec("qwen2.5-omni", "rtx6000ada", "long-fraction", (0.2, 0.6), ("horizon", "mps"),
                     requests=12)
    results = run_sweep(spec)
    doc = sweep_json(spec, results)
    assert set(doc["policies"]) == {"horizon", "mps"}
    for p in doc["policies"].values():
        assert p["x"] == [0.2, 0.6] and len(p["attainment"]) == 2
        assert len(p["attainment_window"]) == len(p["completed_window"]) == 2
        assert all(len(v) == 2 for v in p["p95_ms"].values())
    assert {r.long_fraction for r in results} == {0.2, 0.6} and {r.rate for r in results} == {0.35}


def test_cli_prints_one_json_document() -> None:
    res = CliRunner().invoke(app, ["experiment", "horizon", "--sweep", "rate", "--xs", "0.3",
                                   "--policies", "horizon,vanilla", "--requests", "12", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc["policies"]) == {"horizon", "vanilla"}
    assert doc["policies"]["horizon"]["x"] == [0.3]
    assert "figure10" in doc and "table3" in doc


def test_cli_refuses_bad_options() -> None:
    res = CliRunner().invoke(app, ["experiment", "horizon", "--model", "gpt"])
    assert res.exit_code == 2 and "--model" in res.output and "known: qwen2.5-omni" in res.output
    res = CliRunner().invoke(app, ["experiment", "horizon", "--policies", "horizon,sjf"])
    assert res.exit_code == 2 and "--policies: unknown sjf" in res.output
    res = CliRunner().invoke(app, ["experiment", "horizon", "--sweep", "long-fraction", "--xs", "0.5,1.5"])
    assert res.exit_code == 2 and "--xs" in res.output and "fractions must be in [0, 1]" in res.output
    res = CliRunner().invoke(app, ["experiment", "horizon", "--first-audio", "half"])
    assert res.exit_code == 2 and "--first-audio" in res.output
    res = CliRunner().invoke(app, ["experiment", "horizon", "--token-budget", "0"])
    assert res.exit_code == 2 and "--token-budget" in res.output


def test_cli_calibrates_s_cap_from_a_real_sweep_file(tmp_path: Path) -> None:
    fig4 = default_sweep_path()  # HorizonServe Figure 4
    res = CliRunner().invoke(app, ["experiment", "horizon", "--xs", "0.3", "--policies", "horizon",
                                   "--requests", "10", "--sm-sweep", str(fig4), "--json"])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.stdout)["meta"]
    assert meta["ladder"][-1] == 64 and meta["sweep_source"] == str(fig4)  # S_cap from Figure 4(b)
    bad = tmp_path / "sweep.json"
    bad.write_text('{"kind": "omniplane-sm-sweep", "gpu": "RTX6000Ada", "works": {}, "points": []}')
    res = CliRunner().invoke(app, ["experiment", "horizon", "--requests", "10", "--sm-sweep", str(bad)])
    assert res.exit_code == 2 and "sweep.json: points:" in res.output  # names the file and the field


def test_first_audio_at_the_first_chunk_streams_into_the_vocoder(testbed: SingleGPU) -> None:
    """The paper's TTFO is the first audio chunk: the testbed's speech classes stream the talker
    into token2wav, their SLO follows the same 5 x solo p95 rule and is shorter than the
    whole-utterance one, the text classes' are unchanged."""
    from omniplane.repro.horizon.experiment import first_audio_model

    base = load_model("qwen2.5-omni")
    chunk = first_audio_model(base, "chunk")
    assert not any(e.streaming for e in base.component("talker").edges)
    assert all(e.streaming for e in chunk.component("talker").edges if e.to == "token2wav")
    assert not any(e.streaming for e in chunk.component("thinker").edges)  # only into the vocoder
    assert first_audio_model(base, "whole") is base
    whole = single_gpu("qwen2.5-omni", "rtx6000ada", 1, None, "whole")
    assert testbed.first_audio == "chunk"
    ch, wh = testbed.calibration.slo, whole.calibration.slo
    assert ch.slo_s("t2t") == wh.slo_s("t2t")
    assert ch.slo_s("t2a") < wh.slo_s("t2a")
    with pytest.raises(ValueError, match="first_audio"):
        first_audio_model(base, "half")


def test_token_budget_is_vllms_default_for_the_gpu(testbed: SingleGPU) -> None:
    from omniplane.repro.horizon.experiment import vllm_token_budget

    assert testbed.token_budget == 2048  # 48 GB: vLLM's 2048 for the OpenAI server
    assert vllm_token_budget(load_gpus().get("RTXPRO6000")) == 8192  # >= 70 GiB
    with pytest.raises(ValueError, match="token_budget"):
        SingleGPU("qwen2.5-omni", "rtx6000ada", token_budget=0)
