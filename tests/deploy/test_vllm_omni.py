"""vLLM-Omni deploy configs generated per plan node (vLLM-Omni 0.30 schema), and the replica.

Without vLLM-Omni: the files' structure. With it (marker ``omni``, ``make pytest-omni``): every
node's file of the catalog plan and of a one-node plan per catalog model loads through
vLLM-Omni's own loader, naming omniplane's scheduler exactly where the plan sets a policy, and a
replica of a node holding part of a pipeline says why its sessions cannot run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from omniplane.deploy.vllm_omni import (
    loader_document,
    node_stage_config,
    node_stages,
    write_stage_configs,
)
from omniplane.spec import ExecutorGroup, PlanNode, ResolvedPlan, load_model
from omniplane.spec.load import load_layout
from tests.deploy.plans import plan_of
from tests.vllm.omni_loader import HF_CONFIGS


def _stage(doc: dict, sid: int) -> dict:
    [s] = [s for s in doc["stages"] if s["stage_id"] == sid]
    return s


def one_node_plan(model_name: str, tp: int = 1, policy: str | None = None) -> ResolvedPlan:
    model = load_model(model_name)
    executors = [ExecutorGroup(count=2, tp=1, max_batch=32), ExecutorGroup(count=1, tp=tp, max_batch=64)]
    node = PlanNode(name="all", components=model.topo_order, policy=policy, executors=executors)
    return plan_of(model_name, "H200", [node], ["all"])


def test_each_node_gets_its_stages_with_the_plan_parallelism(catalog_plan: ResolvedPlan) -> None:
    front = node_stage_config(catalog_plan, "front")
    back = node_stage_config(catalog_plan, "back")
    assert front["omniplane"]["stage_ids"] == [0] and back["omniplane"]["stage_ids"] == [1, 2]
    thinker = _stage(front, 0)
    assert (
        thinker["max_num_seqs"] == 128 and thinker["devices"] == "0" and thinker["tensor_parallel_size"] == 1
    )
    # in-node edge: code2wav is fed by the talker of the same file, over the stock connector
    assert (
        _stage(back, 2)["input_connectors"] == load_layout("qwen3-omni").stage_deploy(2)["input_connectors"]
    )
    # cross-node edge: thinker (front) -> talker (back) over the Mooncake connector, both ends named
    assert thinker["output_connectors"] == {"to_stage_1": "mooncake"}
    assert _stage(back, 1)["input_connectors"]["from_stage_0"] == "mooncake"
    assert back["connectors"]["mooncake"]["name"] == "MooncakeTransferEngineConnector"
    # memory sized from what each stage loads (tests/perf/test_stage_memory.py): the thinker stage
    # holds every encoder + the thinker (59 GiB) and KV; the talker + code2wav file does not claim
    # the stock 0.9 + 0.6 + 0.1 of its device, and stage 0 there is node front's entry
    [mem] = front["omniplane"]["memory"].values()
    th = mem["stages"][0]
    assert th["weights_gib"] > 58 and th["kv_tokens"] > 0 and th["seqs_fit"]["p95"] >= 1
    held = _stage(front, 0)["gpu_memory_utilization"] * mem["capacity_gib"]
    assert held >= th["weights_gib"] + sum(th["reserve_gib"].values()) + th["kv_gib"] - 0.02
    [back_mem] = back["omniplane"]["memory"].values()
    assert [s["stage_id"] for s in back_mem["stages"]] == [1, 2]
    assert back_mem["utilization_sum"] <= back_mem["utilization_limit"]
    assert _stage(back, 0)["gpu_memory_utilization"] == _stage(front, 0)["gpu_memory_utilization"]
    assert not any("encoder-only" in n for n in back["omniplane"]["notes"])
    assert "pipeline" not in front  # the plan sets no policy: vLLM-Omni's own schedulers


def test_an_encoder_split_is_reported_not_faked(catalog_plan: ResolvedPlan) -> None:
    """vLLM-Omni 0.30's loader rejects a per-stage ec_transfer_config (test below), so an
    encoder-only node is the thinker stage as stock and its file says the split is not realised."""
    aud = node_stage_config(catalog_plan, "aud")
    assert aud["omniplane"]["stage_ids"] == [0] and "ec_transfer_config" not in _stage(aud, 0)
    assert any("encoder-only node" in n and "not realised" in n for n in aud["omniplane"]["notes"])
    front = node_stage_config(catalog_plan, "front")
    assert any("audio_encoder" in n and "own encoders" in n for n in front["omniplane"]["notes"])


def test_tensor_parallel_groups_list_their_devices() -> None:
    doc = node_stage_config(one_node_plan("qwen3-omni", tp=4), "all", group=1)
    assert doc["omniplane"]["stage_ids"] == [0, 1, 2]
    assert {s["devices"] for s in doc["stages"]} == {"0,1,2,3"}
    assert {s["tensor_parallel_size"] for s in doc["stages"]} == {4}
    assert "mooncake" not in doc.get("connectors", {})  # no cross-node edges


def test_a_node_policy_switches_omniplane_on() -> None:
    doc = node_stage_config(one_node_plan("qwen2.5-omni", policy="horizon"), "all")
    assert doc["pipeline"] == "omniplane_qwen2_5_omni"
    settings = [s["additional_config"]["omniplane"] for s in doc["stages"]]
    assert [(x["role"], x["policy"]) for x in settings] == [
        ("shared", "horizon"),
        ("downstream", "fcfs"),
        ("downstream", "fcfs"),
    ]
    assert {x["total_sms"] for x in settings} == {132} and settings[0]["control"] == "omniplane-all-g0"
    assert [s["devices"] for s in doc["stages"]] == ["0", "0", "0"]  # the plan's placement, TP 1


def test_configs_are_written_per_deployment(catalog_plan: ResolvedPlan, tmp_path: Path) -> None:
    paths = write_stage_configs(catalog_plan, tmp_path)
    assert sorted(p.name for p in paths) == ["aud-g0.yaml", "back-g0.yaml", "front-g0.yaml"]
    text = (tmp_path / "back-g0.yaml").read_text()
    assert "# model: Qwen/Qwen3-Omni-30B-A3B-Instruct" in text
    assert "omniplane" not in yaml.safe_load(text)  # the document is vLLM-Omni's alone


def test_models_without_a_layout_and_split_stages_are_refused() -> None:
    with pytest.raises(ValueError, match="no vLLM-Omni stage layout known for model 'qwen3-vl'"):
        node_stage_config(one_node_plan("qwen3-vl"), "all")
    plan = plan_of("qwen-image", "H200", [
        PlanNode(name="te", components=["text_encoder"], executors=[ExecutorGroup(count=1, max_batch=8)]),
        PlanNode(name="gen", components=["dit", "vae"], executors=[ExecutorGroup(count=1, max_batch=4)]),
    ], ["te", "gen"])
    with pytest.raises(ValueError, match="vLLM-Omni runs a stage whole"):
        node_stages(plan, "te")


# ---- against the installed vLLM-Omni ------------------------------------------------------------
def _resolve(model: str, doc: dict, tmp_path: Path, name: str) -> list:
    from tests.vllm.omni_loader import resolve

    return list(resolve(model, loader_document(doc), tmp_path, name)[0].stage_configs)


@pytest.mark.omni
def test_every_node_config_loads_through_vllm_omnis_loader(
    catalog_plan: ResolvedPlan, tmp_path: Path
) -> None:
    pytest.importorskip("vllm_omni")
    for node in ("aud", "front", "back"):
        doc = node_stage_config(catalog_plan, node)
        stages = _resolve("qwen3-omni", doc, tmp_path, node)
        assert all(s.scheduler_cls.startswith("vllm_omni.") for s in stages)  # no policy in this plan
        for sid in doc["omniplane"]["stage_ids"]:
            assert str(stages[sid].runtime_config.devices) == "0"
    bad = node_stage_config(catalog_plan, "aud")
    _stage(bad, 0)["ec_transfer_config"] = {"ec_connector": "ECExampleConnector", "ec_role": "ec_producer"}
    with pytest.raises(ValueError, match="no structured config owner: ec_transfer_config"):
        _resolve("qwen3-omni", bad, tmp_path, "aud-ec")  # why encoder splits are not written
    for model in HF_CONFIGS:
        for policy in (None, "horizon"):
            doc = node_stage_config(one_node_plan(model, policy=policy), "all")
            stages = _resolve(model, doc, tmp_path, f"{model}-{policy}")
            llm = [s for s in stages if s.scheduler_cls is not None]
            assert llm, model
            ours = [s.scheduler_cls.startswith("omniplane.vllm.omni_scheduler.") for s in llm]
            assert all(ours) if policy else not any(ours), (model, policy)
