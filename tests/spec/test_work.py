"""Sampling and resolving per-request work."""

from __future__ import annotations

import numpy as np

from omniplane.spec import ModelSpec, load_model, parse
from omniplane.spec.work import mean_work, resolve, sample_work
from tests.spec.builders import tiny_model


def test_llm_prompt_includes_encoder_tokens_and_vocoder_voices_talker_tokens() -> None:
    model = parse(ModelSpec, tiny_model())
    raw = {"enc": {"items": 2, "tokens_per_item": 256},
           "thinker": {"prompt_tokens": 50, "output_tokens": 30},
           "talker": {"output_tokens": 125}}
    work = resolve(model, "i2a", raw)
    assert work["enc"] == {"items": 2, "tokens": 512}
    assert work["thinker"] == {"prompt_tokens": 562, "output_tokens": 30}
    assert work["talker"] == {"prompt_tokens": 592, "output_tokens": 125}  # thinker's context
    assert work["voc"] == {"audio_seconds": 125 / 12.5}


def test_audio_encoder_tokens_follow_seconds_and_rate() -> None:
    model = load_model("qwen3-omni")
    raw = {"audio_encoder": {"items": 1, "seconds": 8.0},
           "image_encoder": {"items": 1, "tokens_per_item": 100},
           "thinker": {"prompt_tokens": 10, "output_tokens": 5}}
    work = resolve(model, "tia2t", raw)
    assert work["audio_encoder"]["tokens"] == 104  # 8 s x 13 tokens per whole second
    assert work["thinker"]["prompt_tokens"] == 214


def test_sampling_is_deterministic_per_seed_and_counts_are_whole() -> None:
    model = load_model("qwen3-omni")
    a = sample_work(model, "tiva2a", np.random.default_rng(3), 50)
    b = sample_work(model, "tiva2a", np.random.default_rng(3), 50)
    c = sample_work(model, "tiva2a", np.random.default_rng(4), 50)
    assert a == b and a != c
    for w in a:
        assert w["thinker"]["output_tokens"] >= 1 and w["thinker"]["output_tokens"].is_integer()
        assert w["image_encoder"]["items"] in (1, 2, 3, 4)


def test_dit_tokens_from_pixels() -> None:
    work = mean_work(load_model("qwen-image"), "t2i-1024", n=10)
    assert work["dit"]["tokens"] == 4096 and work["dit"]["steps"] == 50
    assert work["text_encoder"]["output_tokens"] == 0
