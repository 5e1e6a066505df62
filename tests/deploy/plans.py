"""Plans built in code for the deploy tests: every request type routed through the same nodes;
plan files for the export tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from omniplane.spec import PlanNode, PlanSpec, ResolvedPlan, Route, load_gpus, load_model, resolve_plan


def plan_of(model_name: str, gpu: str, nodes: list[PlanNode], route: list[str]) -> ResolvedPlan:
    """``model_name`` on ``gpu`` with ``nodes``, every type taking ``route`` (catalog GPUs)."""
    model = load_model(model_name)
    spec = PlanSpec(model=model_name, gpu=gpu, nodes=nodes,
                    routes={t: [Route(nodes=route, p=1.0)] for t in model.type_names})
    return resolve_plan(spec, model, load_gpus())


QWEN3_OMNI_TYPES = ("ti2t", "tiv2t", "tia2t", "tiva2t", "ti2a", "tiv2a", "tia2a", "tiva2a")


def _plan_file(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def mixed_plan_file(tmp_path: Path) -> Path:
    """The thinker stage (with its encoders) on H100, talker + code2wav on L40S (plan --inventory's
    shape: a per-group gpu)."""
    front = ["image_encoder", "video_encoder", "audio_encoder", "thinker"]
    doc = {"kind": "plan", "name": "mixed", "model": "qwen3-omni", "gpu": "H100", "nodes": [
        {"name": "front", "components": front, "executors": [{"count": 2, "tp": 1, "max_batch": 16}]},
        {"name": "back", "components": ["talker", "code2wav"], "sharing": "timeslice",
         "executors": [{"count": 3, "tp": 1, "max_batch": 32, "gpu": "L40S"}]}],
        "routes": {t: [{"nodes": ["front", "back"] if t.endswith("2a") else ["front"], "p": 1.0}]
                   for t in QWEN3_OMNI_TYPES}}
    return _plan_file(tmp_path / "mixed.yaml", doc)


def run_plan_file(tmp_path: Path) -> Path:
    """``make run``'s plan without its search (24 s): ``omniplane plan --model qwen3-omni --gpus 16
    --gpu A100-80GB --workload qwen3-omni-servegen`` returns the vLLM-Omni baseline, these two
    nodes of 8 executors (its nodes and routes; slo, prediction and meta left out)."""
    front = "audio_encoder+image_encoder+video_encoder+thinker"
    doc = {"kind": "plan", "name": "qwen3-omni-vllm-omni", "model": "qwen3-omni", "gpu": "A100-80GB",
           "gpus": 16, "transfer_ms": 10.0, "nodes": [
               {"name": front, "components": front.split("+"),
                "executors": [{"count": 8, "tp": 1, "max_batch": 28}]},
               {"name": "talker+code2wav", "components": ["talker", "code2wav"], "sharing": "timeslice",
                "executors": [{"count": 8, "tp": 1, "max_batch": 16}]}],
           "routes": {t: [{"nodes": [front, "talker+code2wav"] if t.endswith("2a") else [front], "p": 1.0}]
                      for t in QWEN3_OMNI_TYPES}}
    return _plan_file(tmp_path / "run.yaml", doc)
