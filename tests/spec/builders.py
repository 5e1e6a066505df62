"""Small valid spec documents for tests, as plain dicts (mutate them to make bad ones)."""

from __future__ import annotations

import copy
from typing import Any

SRC = "https://example.org/model-card"


def tiny_model() -> dict[str, Any]:
    """encoder -> thinker -> talker -> vocoder, with text and audio output types."""
    return copy.deepcopy(
        {
            "kind": "model",
            "name": "tiny",
            "components": [
                {
                    "name": "enc",
                    "kind": "encoder",
                    "modalities": ["image"],
                    "size": {"params": 1e8, "layers": 4, "hidden": 256, "source": SRC},
                    "edges": [{"to": "thinker", "colocatable": True}],
                },
                {
                    "name": "thinker",
                    "kind": "llm",
                    "size": {"params": 1e9, "layers": 8, "hidden": 1024, "heads": 8,
                             "kv_heads": 2, "source": SRC},
                    "edges": [{"to": "talker", "colocatable": True}],
                },
                {
                    "name": "talker",
                    "kind": "llm",
                    "size": {"params": 2e8, "layers": 4, "hidden": 512, "heads": 4,
                             "kv_heads": 1, "source": SRC},
                    "edges": [{"to": "voc", "colocatable": True}],
                },
                {
                    "name": "voc",
                    "kind": "generator",
                    "generator": "vocoder",
                    "size": {"params": 5e7, "frame_rate_hz": 12.5, "source": SRC},
                },
            ],
            "request_types": [
                {
                    "name": "t2t",
                    "inputs": ["text"],
                    "output": "text",
                    "path": ["thinker"],
                    "work": {"thinker": {"prompt_tokens": 100, "output_tokens": 20}},
                },
                {
                    "name": "i2a",
                    "inputs": ["text", "image"],
                    "output": "audio",
                    "path": ["enc", "thinker", "talker", "voc"],
                    "work": {
                        "enc": {"items": 1, "tokens_per_item": 256},
                        "thinker": {"prompt_tokens": {"dist": "lognormal", "median": 50,
                                                      "sigma": 0.5}, "output_tokens": 30},
                        "talker": {"output_tokens": 100},
                    },
                },
            ],
            "executor_types": [
                {"name": "enc", "hosts": ["enc"], "tp": [1], "max_batch": [8]},
                {"name": "thinker", "hosts": ["thinker"], "tp": [1, 2], "max_batch": [16, 32]},
                {"name": "talker", "hosts": ["talker"], "tp": [1], "max_batch": [16]},
                {"name": "voc", "hosts": ["voc"], "tp": [1], "max_batch": [4]},
            ],
        }
    )


def tiny_workload(model_file: str = "tiny.yaml") -> dict[str, Any]:
    return {
        "kind": "workload",
        "name": "w",
        "model": model_file,
        "mix": {"t2t": 0.7, "i2a": 0.3},
        "arrival": {"process": "poisson", "rate": 1.0},
    }


def tiny_plan(model_file: str = "tiny.yaml") -> dict[str, Any]:
    return {
        "kind": "plan",
        "model": model_file,
        "gpu": "A100-80GB",
        "gpus": 4,
        "nodes": [
            {"name": "front", "components": ["enc", "thinker"],
             "executors": [{"count": 2, "tp": 1, "max_batch": 16}]},
            {"name": "back", "components": ["talker", "voc"],
             "executors": [{"count": 1, "tp": 1, "max_batch": 16}]},
        ],
        "routes": {
            "t2t": [{"nodes": ["front"], "p": 1.0}],
            "i2a": [{"nodes": ["front", "back"], "p": 1.0}],
        },
    }
