"""vLLM-Omni stage configs generated per plan node."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from omniplane.deploy.vllm_omni import GPU_MEMORY_BUDGET, node_stage_config, write_stage_configs
from omniplane.spec import (
    ExecutorGroup,
    PlanNode,
    PlanSpec,
    ResolvedPlan,
    Route,
    load_gpus,
    load_model,
    resolve_plan,
)


def _stage(doc: dict, name: str) -> dict:
    [s] = [s for s in doc["stage_args"] if s["engine_args"]["model_stage"] == name]
    return s


def test_each_node_gets_its_stages_with_the_plan_parallelism(catalog_plan: ResolvedPlan) -> None:
    front = node_stage_config(catalog_plan, "front")
    back = node_stage_config(catalog_plan, "back")
    assert [s["engine_args"]["model_stage"] for s in front["stage_args"]] == ["thinker"]
    assert [s["engine_args"]["model_stage"] for s in back["stage_args"]] == ["talker", "code2wav"]
    thinker = _stage(front, "thinker")
    assert thinker["engine_args"]["max_num_seqs"] == 128 and thinker["runtime"]["devices"] == "0"
    # in-node edge: code2wav is fed by the talker stage of the same file
    assert _stage(back, "code2wav")["engine_input_source"] == [0]
    # cross-node edge: thinker (front) -> talker (back) over a connector, both ends named
    assert thinker["output_connectors"] == {"to_back": "mooncake"}
    assert _stage(back, "talker")["input_connectors"] == {"from_front": "mooncake"}
    for doc in (front, back):
        total = sum(s["engine_args"]["gpu_memory_utilization"] for s in doc["stage_args"])
        assert total == pytest.approx(GPU_MEMORY_BUDGET, abs=0.002)


def test_an_encoder_only_node_produces_embeddings_for_the_thinker(catalog_plan: ResolvedPlan) -> None:
    aud = node_stage_config(catalog_plan, "aud")
    [stage] = aud["stage_args"]
    assert stage["engine_args"]["ec_transfer_config"]["ec_role"] == "ec_producer"
    assert "final_output" not in stage
    assert (
        _stage(node_stage_config(catalog_plan, "front"), "thinker")["engine_args"]["ec_transfer_config"][
            "ec_role"
        ]
        == "ec_consumer"
    )


def test_tensor_parallel_groups_list_their_devices() -> None:
    model = load_model("qwen3-omni")
    spec = PlanSpec(
        model="qwen3-omni",
        gpu="A100-80GB",
        nodes=[
            PlanNode(
                name="all",
                components=model.topo_order,
                executors=[
                    ExecutorGroup(count=2, tp=2, max_batch=32),
                    ExecutorGroup(count=1, tp=4, max_batch=64),
                ],
            )
        ],
        routes={t: [Route(nodes=["all"], p=1.0)] for t in model.type_names},
    )
    plan = resolve_plan(spec, model, load_gpus())
    doc = node_stage_config(plan, "all", group=1)
    assert [s["engine_args"]["model_stage"] for s in doc["stage_args"]] == ["thinker", "talker", "code2wav"]
    assert {s["runtime"]["devices"] for s in doc["stage_args"]} == {"0,1,2,3"}
    assert {s["engine_args"]["tensor_parallel_size"] for s in doc["stage_args"]} == {4}
    assert "runtime" not in doc  # no cross-node edges: no connectors


def test_configs_are_written_per_deployment(catalog_plan: ResolvedPlan, tmp_path: Path) -> None:
    paths = write_stage_configs(catalog_plan, tmp_path)
    assert sorted(p.name for p in paths) == ["aud-g0.yaml", "back-g0.yaml", "front-g0.yaml"]
    doc = yaml.safe_load((tmp_path / "back-g0.yaml").read_text())
    assert doc["model"] == "Qwen/Qwen3-Omni-30B-A3B-Instruct"


def test_a_model_without_a_known_layout_is_refused() -> None:
    model = load_model("qwen3-vl")
    spec = PlanSpec(
        model="qwen3-vl",
        gpu="A100-80GB",
        nodes=[
            PlanNode(name="n", components=model.topo_order, executors=[ExecutorGroup(count=1, max_batch=32)])
        ],
        routes={t: [Route(nodes=["n"], p=1.0)] for t in model.type_names},
    )
    with pytest.raises(ValueError, match="no vLLM-Omni stage layout known for model 'qwen3-vl'"):
        node_stage_config(resolve_plan(spec, model, load_gpus()), "n")
