"""vLLM-Omni's stages sized as the runtime loads them (omniplane.perf.stage_memory), the shares
``omniplane vllm-omni config`` and ``deploy --engine vllm-omni`` write from it, and the refusal of
a device whose stages do not fit."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.deploy.vllm_omni import node_stage_config, write_stage_configs
from omniplane.perf.stage_memory import (
    DEVICE_RESERVE_BYTES,
    GIB,
    Context,
    StageMemoryError,
    size_device,
    stage_memory,
)
from omniplane.spec import ExecutorGroup, PlanNode, PlanSpec, Route, load_gpus, load_model, resolve_plan
from omniplane.spec.load import load_layout

MODEL = load_model("qwen3-omni")
LAYOUT = load_layout("qwen3-omni")
CTX = {"thinker": Context(1700.0, 4000.0, 100), "talker": Context(1900.0, 4300.0, 30)}
TABLE = """kind: omniplane-slo-table
source: "assumption: test table"
classes:
  text: {priority: 0, path: short, slo_s: 0.8}
  audio: {priority: 10, path: long, slo_s: 4.0}
"""


def _entries(ids: list[int], **over: object) -> list[dict]:
    assert LAYOUT is not None
    return [{**copy.deepcopy(LAYOUT.stage_deploy(i)), **over} for i in ids]


def test_the_thinker_stage_loads_every_encoder() -> None:
    assert LAYOUT is not None
    st = stage_memory(MODEL, LAYOUT, _entries([0])[0], CTX)
    assert st.components == ("audio_encoder", "image_encoder", "video_encoder", "thinker")
    # 61 GB thinker + 1.3 GB audio + 1.08 GB vision tower (image and video share it: counted once)
    assert st.weights_bytes == pytest.approx(61e9 + 1.3e9 + 1.08e9)
    assert st.kv_per_token == 48 * 2 * 4 * 128 * 2  # layers x K,V x kv heads x head dim x 2 B
    assert st.graph_bytes == 2 * GIB and st.context is not None and st.context.p95 == 4000.0
    tp2 = stage_memory(MODEL, LAYOUT, _entries([0], tensor_parallel_size=2)[0], CTX)
    assert tp2.weights_bytes == pytest.approx(st.weights_bytes / 2)


@pytest.mark.parametrize("gpu", ["A100-80GB", "H100-SXM"])
def test_a_thinker_alone_gets_its_weights_and_kv(gpu: str) -> None:
    assert LAYOUT is not None
    kind = load_gpus().get(gpu)
    dev = size_device(MODEL, LAYOUT, _entries([0]), kind, CTX)
    [th] = dev.stages
    held = th.utilization * kind.memory_bytes
    assert held >= th.weights_bytes + th.reserve_bytes + th.kv_for(1)
    assert th.kv_bytes == pytest.approx(held - th.fixed_bytes)
    # 80 GB: 74.5 GiB - 2 GiB device reserve - 2 GiB graphs - weights 59.0 - reserve 6.8 GiB
    assert 3.5 * GIB < th.kv_bytes < 5.5 * GIB
    assert 0 < th.seqs(4000.0) < th.seqs(1700.0) < th.max_batch == 64
    assert dev.utilization * kind.memory_bytes <= dev.limit_bytes


def test_stages_sharing_a_device_stay_within_vllm_omnis_admission() -> None:
    assert LAYOUT is not None
    h200 = load_gpus().get("H200")
    dev = size_device(MODEL, LAYOUT, _entries([0, 1, 2], max_num_seqs=32), h200, CTX)
    graphs = sum(s.graph_bytes for s in dev.stages)
    # vllm_omni/engine/stage_admission.py: sum(cap x util) + graphs + 1 GiB + 1 GiB <= cap
    assert sum(s.utilization for s in dev.stages) * h200.memory_bytes + graphs + DEVICE_RESERVE_BYTES \
        <= h200.memory_bytes
    for s in dev.stages:
        assert s.utilization * h200.memory_bytes >= s.weights_bytes + s.reserve_bytes + s.kv_for(1)
    assert [s.seqs(s.context.p95) >= 32 for s in dev.stages if s.context] == [True, True]


def test_a_stage_that_cannot_hold_one_sequence_is_refused() -> None:
    assert LAYOUT is not None
    a100 = load_gpus().get("A100-80GB")
    with pytest.raises(StageMemoryError, match=r"stage 0 'thinker' .* on A100-80GB \(TP 1\) with stage\(s\) "
                                               r"talker, code2wav .*weights 59.03 GiB"):
        size_device(MODEL, LAYOUT, _entries([0, 1, 2]), a100, CTX)


def _config(tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
    table = tmp_path / "slo.yaml"
    table.write_text(TABLE)
    out = tmp_path / "q3.yaml"
    res = CliRunner().invoke(app, ["vllm-omni", "config", "--model", "qwen3-omni", "--gpu", "a100",
                                   "--slo-table", str(table), "--out", str(out), *extra])
    return res.exit_code, res.output, out


def test_vllm_omni_config_gives_the_thinker_its_weights_and_kv(tmp_path: Path) -> None:
    code, output, out = _config(tmp_path)  # all stages on device 0 of one A100: they do not fit
    assert code == 2 and "stage 0 'thinker'" in output and "--no-single-gpu" in output
    assert not out.exists()
    code, output, out = _config(tmp_path, "--no-single-gpu")
    assert code == 0, output
    text = out.read_text()
    doc = yaml.safe_load(text)
    util = {d["stage_id"]: d["gpu_memory_utilization"] for d in doc["stages"]}
    weights_gib = (61e9 + 1.3e9 + 1.08e9) / GIB
    assert util[0] * 80e9 / GIB > weights_gib + 4  # before: 0.506 (37.7 GiB), below the weights
    assert util[1] + util[2] <= 0.973 and "# device 0 (A100-80GB)" in text and "KV tokens" in text


def test_a_node_that_does_not_fit_writes_no_file(tmp_path: Path) -> None:
    spec = PlanSpec(
        model="qwen3-omni", gpu="A100-80GB",
        nodes=[PlanNode(name="all", components=MODEL.topo_order,
                        executors=[ExecutorGroup(count=1, tp=1, max_batch=32)]),
               PlanNode(name="back", components=["talker", "code2wav"],
                        executors=[ExecutorGroup(count=1, tp=1, max_batch=64)])],
        routes={t: [Route(nodes=["all"], p=1.0)] for t in MODEL.type_names},
    )
    plan = resolve_plan(spec, MODEL, load_gpus())
    with pytest.raises(StageMemoryError, match=r"plan node 'all' \(executor group 0\): vLLM-Omni stage 0"):
        write_stage_configs(plan, tmp_path / "cfg")
    assert not (tmp_path / "cfg").exists()
    alone = node_stage_config(plan, "back")  # its thinker stage's only node does not fit: stock entry
    assert any("stage 0 (thinker): no other node that runs it fits" in n for n in alone["omniplane"]["notes"])
    h200 = resolve_plan(spec.model_copy(update={"gpu": "H200"}), MODEL, load_gpus())
    back = node_stage_config(h200, "back")  # talker + code2wav: its own stages, not encoder-only
    assert not any("encoder-only" in n for n in back["omniplane"]["notes"])
    [mem] = back["omniplane"]["memory"].values()
    assert [s["stage"] for s in mem["stages"]] == ["talker", "code2wav"]
    assert mem["utilization_sum"] <= mem["utilization_limit"]
