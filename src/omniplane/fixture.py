"""The tiny-model test fixture: a randomly initialised Qwen2-architecture decoder that vLLM's
CPU build serves, built locally from a config with a fixed seed, never downloaded.

It is a **test fixture**, not a model anyone should serve: its weights are random (the
output is noise), it has no tokenizer (requests carry token-id prompts; vLLM runs with
``--skip-tokenizer-init``), and it exists so that a real serving engine nobody here wrote
(continuous batching, chunked prefill, KV blocks, preemption, real compute times) runs on a
laptop CPU: the profiler measures it, the simulator predicts it, omniplane's scheduler class runs
inside it and Ray Serve hosts it (docs/guides/check-your-engine.md).

``ensure_model_dir()`` builds it on first use into a cache folder
(``$OMNIPLANE_CACHE/fixtures/<name>-<hash>``, default ``~/.cache/omniplane``): HF-style
``config.json`` + ``model.safetensors`` + ``generation_config.json``, about 14 MB. The folder
name carries a hash of the config and seed, so a changed fixture is rebuilt, never mixed up.
Building needs ``torch`` and ``transformers`` (both come with vLLM; imported only here).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CACHE_ENV = "OMNIPLANE_CACHE"

# A 4-layer Qwen2 decoder (GQA 4/2, head_dim 64), ~3.4M parameters. float32: on CPUs without
# AVX512-BF16 a bf16 matmul runs ~7x slower than float32 (measured here: a 1024x256 by 256x512
# linear, 124 ms bf16 vs 18 ms float32 on one loaded core), and vLLM serves the checkpoint's dtype.
QWEN2_TINY: Mapping[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 2048,
    "max_position_embeddings": 4096,
    "max_window_layers": 4,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float32",
}


@dataclass(frozen=True)
class TinyModel:
    """A fixture decoder: its HF config and the seed its weights are drawn with."""

    name: str
    config: Mapping[str, Any] = field(default_factory=lambda: dict(QWEN2_TINY))
    seed: int = 0

    @property
    def vocab_size(self) -> int:
        return int(self.config["vocab_size"])

    @property
    def max_model_len(self) -> int:
        return int(self.config["max_position_embeddings"])

    @property
    def digest(self) -> str:
        blob = json.dumps({"config": dict(self.config), "seed": self.seed}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


FIXTURE = TinyModel("tiny-qwen2")


def cache_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "omniplane"


def model_dir(model: TinyModel = FIXTURE, cache: Path | None = None) -> Path:
    """Where the fixture lives (built or not)."""
    return (cache or cache_root()) / "fixtures" / f"{model.name}-{model.digest}"


def is_built(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "model.safetensors").is_file()


def ensure_model_dir(model: TinyModel = FIXTURE, cache: Path | None = None) -> Path:
    """The fixture's folder, built on first use (atomically: a half-built folder is never seen,
    and two processes building at once both end with the same folder)."""
    final = model_dir(model, cache)
    if is_built(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        build(model, tmp)
        try:
            tmp.rename(final)
        except OSError:  # another process finished first
            if not is_built(final):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    final.chmod(0o755)
    return final


def build(model: TinyModel, out: Path) -> None:
    """Draw the weights with ``model.seed`` and write the HF folder (needs torch, transformers)."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError as exc:
        raise RuntimeError(
            f"building the {model.name} fixture needs torch and transformers (they come with vLLM: "
            f"make vllm-extra, then run from .venv-vllm): {exc}"
        ) from None
    cfg = dict(model.config)
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(model.seed)
    net = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    net.save_pretrained(str(out), safe_serialization=True)
    note = {
        "omniplane_fixture": model.name,
        "seed": model.seed,
        "digest": model.digest,
        "what": "random weights for tests (docs/guides/check-your-engine.md); token-id prompts, no tokenizer",
    }
    (out / "omniplane-fixture.json").write_text(json.dumps(note, indent=2) + "\n")
