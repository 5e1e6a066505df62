"""vLLM-Omni's own config loader on a deploy document, for the ``omni`` tests (imports vLLM-Omni
when called)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

# the least HF config.json that lets vLLM-Omni resolve each pipeline (no weights, no hub)
HF_CONFIGS = {
    "qwen2.5-omni": {"model_type": "qwen2_5_omni", "architectures": ["Qwen2_5OmniModel"]},
    "qwen3-omni": {"model_type": "qwen3_omni_moe", "architectures": ["Qwen3OmniMoeForConditionalGeneration"]},
    "bagel": {"model_type": "bagel", "architectures": ["BagelForConditionalGeneration"]},
    "mimo-audio": {"model_type": "qwen2", "architectures": ["MiMoAudioModel"]},
}


def hf_dir(model: str, tmp_path: Path) -> Path:
    d = tmp_path / f"hf-{model}"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(HF_CONFIGS[model]))
    return d


def resolve(
    model: str, deploy: Path | dict[str, Any], tmp_path: Path, name: str = "deploy"
) -> tuple[Any, str]:
    """(``resolve_omni_config``'s result, the model directory) for a deploy file or document,
    with omniplane's pipelines registered first."""
    from vllm_omni.config.resolver import resolve_omni_config

    from omniplane.vllm.omni_pipelines import register

    register()
    if isinstance(deploy, dict):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(deploy))
        deploy = path
    d = hf_dir(model, tmp_path)
    res = resolve_omni_config(
        str(d),
        trust_remote_code=False,
        deploy_config_path=str(deploy),
        cli_overrides={},
        stage_overrides=None,
        strategy_config_path=None,
    )
    return res, str(d)
