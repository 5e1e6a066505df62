"""``omniplane plan``'s memory table: the chosen plan's stages as vLLM-Omni loads them
(omniplane.deploy.memory_table); the plan itself is not changed by it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.deploy.memory_table import plan_memory, render
from omniplane.perf.stage_memory import Context
from omniplane.spec import ExecutorGroup, PlanNode, ResolvedPlan, load_model
from tests.deploy.plans import plan_of

ENCODERS = ["audio_encoder", "image_encoder", "video_encoder"]
CTX = {"thinker": Context(1700.0, 4000.0, 100), "talker": Context(1900.0, 4300.0, 30)}
SMALL = ["--model", "qwen3-omni", "--gpus", "2", "--gpu", "H200", "--sim-requests", "80", "--max-simulated",
         "2", "--mc-samples", "24", "--no-baselines", "--mc-budget", "200"]


def _plan(gpu: str) -> ResolvedPlan:
    model = load_model("qwen3-omni")
    nodes = [PlanNode(name="all", components=model.topo_order,
                      executors=[ExecutorGroup(count=1, tp=1, max_batch=32)]),
             PlanNode(name="front", components=[*ENCODERS, "thinker"],
                      executors=[ExecutorGroup(count=2, tp=1, max_batch=64)]),
             PlanNode(name="back", components=["talker", "code2wav"],
                      executors=[ExecutorGroup(count=2, tp=1, max_batch=64)])]
    return plan_of("qwen3-omni", gpu, nodes, ["all"])


def test_every_node_group_is_sized_or_says_why_not() -> None:
    mem = plan_memory(_plan("A100-80GB"), CTX, "test")
    rows = {r["node"]: r for r in mem["nodes"]}
    assert mem["unit"] == "GiB" and set(rows) == {"all", "front", "back"}
    assert "stage 0 'thinker'" in rows["all"]["error"] and "A100-80GB" in rows["all"]["error"]
    [front] = rows["front"]["devices"].values()
    [th] = front["stages"]
    assert th["stage"] == "thinker" and th["weights_gib"] == 59.03  # every encoder + the thinker
    assert 0 < th["seqs_fit"]["p95"] < th["seqs_fit"]["mean"] < th["max_batch"] == 64
    [back] = rows["back"]["devices"].values()
    assert [s["stage"] for s in back["stages"]] == ["talker", "code2wav"]
    assert back["utilization_sum"] <= back["utilization_limit"]
    text = render(mem)
    assert "all-g0 (tp 1): does not fit" in text and "front-g0 (tp 1), A100-80GB (74.5 GiB):" in text
    assert max(len(line) for line in text.splitlines() if not line.startswith("  plan node")) <= 80


def test_plan_prints_and_emits_the_memory_table() -> None:
    res = CliRunner().invoke(app, ["plan", *SMALL])
    assert res.exit_code == 0, res.output
    assert "memory per GPU as vLLM-Omni loads the plan" in res.output and "KV tokens" in res.output
    res = CliRunner().invoke(app, ["plan", *SMALL, "--json"])
    doc = json.loads(res.stdout)
    nodes = doc["memory"]["nodes"]
    assert doc["memory"]["workload"] == "qwen3-omni-servegen" and nodes
    for row in nodes:
        for dev in row["devices"].values():
            assert dev["utilization_sum"] <= dev["utilization_limit"]
            for s in dev["stages"]:
                assert {"weights_gib", "kv_gib", "kv_tokens", "max_batch"} <= set(s)
