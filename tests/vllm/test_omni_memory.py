"""The memory shares omniplane writes (omniplane.perf.stage_memory) as vLLM-Omni reads them: the
files of ``omniplane vllm-omni config`` and of ``deploy --engine vllm-omni`` load through
vLLM-Omni's own loader with each stage's ``gpu_memory_utilization`` as sized, and every device's
stages pass vLLM-Omni's own admission arithmetic (``stage_admission.evaluate``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm_omni")
pytestmark = pytest.mark.omni

import yaml  # noqa: E402
from vllm_omni.engine.stage_admission import StageAdmissionError, StageDemand, evaluate  # noqa: E402
from vllm_omni.engine.stage_init_utils import build_engine_args_dict_from_omni_stage_config  # noqa: E402

from omniplane.deploy.vllm_omni import loader_document, node_stage_config  # noqa: E402
from omniplane.perf.stage_memory import DEVICE_RESERVE_BYTES, GRAPH_RESERVE_BYTES  # noqa: E402
from omniplane.spec import load_gpus, load_plan  # noqa: E402
from omniplane.spec.catalog import catalog_dir  # noqa: E402
from tests.vllm.omni_loader import resolve  # noqa: E402
from tests.vllm.test_stage_config import generate  # noqa: E402


def _admit(args: list[dict], capacity: float) -> None:
    """vLLM-Omni's admission of these stages on one device of ``capacity`` bytes (raises if over)."""
    demands = [StageDemand(stage_id=i, replica_id=0, device_ids=[0],
                           utilization=float(a["gpu_memory_utilization"]),
                           graph_reserve_bytes=0 if a.get("enforce_eager") else GRAPH_RESERVE_BYTES)
               for i, a in enumerate(args)]
    evaluate(demands, {0: int(capacity)})


def test_vllm_omni_config_shares_load_and_pass_admission(tmp_path: Path) -> None:
    doc = generate(tmp_path, "qwen3-omni", "--gpu", "A100", "--no-single-gpu")
    res, hf_dir = resolve("qwen3-omni", tmp_path / "qwen3-omni.yaml", tmp_path)
    args = [build_engine_args_dict_from_omni_stage_config(c, hf_dir) for c in res.stage_configs]
    assert [a["gpu_memory_utilization"] for a in args] == [s["gpu_memory_utilization"] for s in doc["stages"]]
    assert args[0]["gpu_memory_utilization"] > 0.9  # the thinker stage: 59 GiB of weights + KV
    a100 = load_gpus().get("A100-80GB").memory_bytes
    by_dev: dict[str, list[dict]] = {}
    for c, a in zip(res.stage_configs, args, strict=True):
        by_dev.setdefault(str(c.runtime_config.devices), []).append(a)
    assert sorted(by_dev) == ["0", "1"]
    for group in by_dev.values():
        _admit(group, a100)
    with pytest.raises(StageAdmissionError, match="device 0"):  # before: the stock shares on one device
        _admit([{"gpu_memory_utilization": u} for u in (0.9, 0.771, 0.129)], a100)


def test_the_reserves_are_vllm_omnis() -> None:
    from vllm_omni.engine import stage_admission as adm

    assert GRAPH_RESERVE_BYTES == adm._DEFAULT_GRAPH_RESERVE_BYTES
    assert DEVICE_RESERVE_BYTES == adm._DEFAULT_EXTERNAL_RESERVE_BYTES + adm._DEFAULT_SAFETY_MARGIN_BYTES


def test_deploy_files_load_with_their_shares(tmp_path: Path) -> None:
    catalog_plan = load_plan(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
    for node in ("front", "back"):
        doc = node_stage_config(catalog_plan, node)
        path = tmp_path / f"{node}.yaml"
        path.write_text(yaml.safe_dump(loader_document(doc)))
        res, _ = resolve("qwen3-omni", path, tmp_path, node)
        cache = {c.stage_id: c.cache_config for c in res.stage_configs}  # vLLM-Omni's CacheConfig part
        mine = doc["omniplane"]["stage_ids"]
        [mem] = doc["omniplane"]["memory"].values()
        got = [{"gpu_memory_utilization": cache[i].gpu_memory_utilization,
                "enforce_eager": next(d for d in doc["stages"] if d["stage_id"] == i).get("enforce_eager")}
               for i in mine]
        want = [s["gpu_memory_utilization"] for s in mem["stages"]]
        assert [g["gpu_memory_utilization"] for g in got] == want
        _admit(got, catalog_plan.gpu.memory_bytes)
