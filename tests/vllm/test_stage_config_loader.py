"""The generated stage config through the calls vLLM-Omni's loader makes
(``load_stage_configs_from_yaml``: ``OmegaConf.load``, ``OmegaConf.merge`` of each stage's
``engine_args`` into the base engine args, ``runtime.get("max_batch_size")``), and its engine
arguments against vLLM's own ``EngineArgs`` plus the fields vLLM-Omni adds (tests/vllm/omni_schema.py).
vLLM-Omni itself does not install against this vLLM (docs/vllm.md), so its loader is not called."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("vllm")
omegaconf = pytest.importorskip("omegaconf")
pytestmark = pytest.mark.vllm

from vllm.engine.arg_utils import EngineArgs  # noqa: E402

from tests.vllm.omni_schema import OMNI_ENGINE_FIELDS  # noqa: E402
from tests.vllm.test_stage_config import generate  # noqa: E402


def test_omegaconf_loads_and_merges_like_vllm_omni(tmp_path: Path) -> None:
    generate(tmp_path, "--gpu", "H200")
    OmegaConf = omegaconf.OmegaConf
    cfg = OmegaConf.load(tmp_path / "stages.yaml")
    base = OmegaConf.create({"model": "Qwen/Qwen2.5-Omni-7B"})
    for stage in cfg.stage_args:
        merged = OmegaConf.merge(base.copy(), stage.engine_args)
        merged["max_num_seqs"] = int(stage.runtime.get("max_batch_size", 1) or 1)
        args = OmegaConf.to_container(merged, resolve=True)
        assert isinstance(args, dict) and args["additional_config"]["omniplane"]["control"] == "omniplane"


def test_engine_args_are_vllm_or_vllm_omni_fields(tmp_path: Path) -> None:
    data = generate(tmp_path, "--gpu", "H200")
    known = {f.name for f in dataclasses.fields(EngineArgs)} | OMNI_ENGINE_FIELDS
    for stage in data["stage_args"]:
        unknown = set(stage["engine_args"]) - known
        assert not unknown, f"stage {stage['stage_id']}: not engine arguments: {unknown}"
    assert {"scheduler_cls", "worker_cls", "additional_config"} <= known
