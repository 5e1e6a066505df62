"""Solo latency follows its documented semantics (omniplane.perf.solo)."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.perf import CostModel, ExecutorConfig, InfeasibleConfig
from omniplane.perf.solo import default_solo_config, request_latency, solo_latencies
from omniplane.spec import GPUCatalog, ModelSpec, parse
from omniplane.spec.work import sample_work


def _one(specs: dict[str, ModelSpec], model: str, rt: str, seed: int = 3) -> dict[str, dict[str, float]]:
    return sample_work(specs[model], rt, np.random.default_rng(seed), 1)[0]


def _everywhere(spec: ModelSpec, cfg: ExecutorConfig) -> dict[str, ExecutorConfig]:
    """The same executor config for every component."""
    return {c.name: cfg for c in spec.components}


Setup = tuple[ModelSpec, CostModel, ExecutorConfig, dict[str, ExecutorConfig], dict[str, dict[str, float]]]


def _setup(specs: dict[str, ModelSpec], costs: dict[str, CostModel], gpus: GPUCatalog, model: str, gpu: str,
           rt: str) -> Setup:
    """``model`` with one ``gpu`` per component everywhere, and one sampled ``rt`` request."""
    spec = specs[model]
    cfg = ExecutorConfig(gpus.get(gpu), 1)
    return spec, costs[model], cfg, _everywhere(spec, cfg), _one(specs, model, rt)


def test_text_ttft_is_encoders_then_prefill(specs: dict[str, ModelSpec], costs: dict[str, CostModel],
                                            gpus: GPUCatalog) -> None:
    spec, cost = specs["qwen2.5-omni"], costs["qwen2.5-omni"]
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    work = _one(specs, "qwen2.5-omni", "i2t")
    enc = work["vision_encoder"]
    expected = (enc["items"] * spec.cpu_seconds_per_item("vision_encoder")
                + cost.encoder_time("vision_encoder", cfg, int(enc["items"]), enc["tokens"])
                + cost.prefill_time("thinker", cfg, int(work["thinker"]["prompt_tokens"])))
    got = request_latency(spec, cost, _everywhere(spec, cfg), "i2t", work)
    assert got == pytest.approx(expected)


def test_non_streaming_speech_waits_for_whole_outputs(specs: dict[str, ModelSpec],
                                                      costs: dict[str, CostModel], gpus: GPUCatalog) -> None:
    """Qwen2.5-Omni's edges do not stream: TTFO = thinker done + talker done + whole utterance."""
    spec, cost = specs["qwen2.5-omni"], costs["qwen2.5-omni"]
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    work = _one(specs, "qwen2.5-omni", "t2a")
    th, tk = work["thinker"], work["talker"]

    def llm(name: str, prompt: int, out: int) -> float:
        return cost.prefill_time(name, cfg, prompt) + sum(
            cost.decode_step_time(name, cfg, 1, prompt + k) for k in range(1, out))

    expected = (llm("thinker", int(th["prompt_tokens"]), int(th["output_tokens"]))
                + llm("talker", int(tk["prompt_tokens"]), int(tk["output_tokens"]))
                + cost.vocoder_time("token2wav", cfg, 1, work["token2wav"]["audio_seconds"]))
    got = request_latency(spec, cost, _everywhere(spec, cfg), "t2a", work)
    assert got == pytest.approx(expected)


def test_streaming_speech_starts_on_the_first_token(specs: dict[str, ModelSpec], costs: dict[str, CostModel],
                                                    gpus: GPUCatalog) -> None:
    spec, cost, cfg, cfgs, work = _setup(specs, costs, gpus, "qwen3-omni", "H200", "ti2a")
    streaming = request_latency(spec, cost, cfgs, "ti2a", work)
    text = request_latency(spec, cost, cfgs, "ti2t", {k: work[k] for k in ("image_encoder", "thinker")})
    talker_ctx = int(work["thinker"]["prompt_tokens"]) + 1
    frame = 1 / (spec.component("code2wav").size.frame_rate_hz or 1)
    expected = (text + cost.prefill_time("talker", cfg, talker_ctx)
                + cost.vocoder_time("code2wav", cfg, 1, frame))
    assert streaming == pytest.approx(expected)
    # the same graph without streaming edges waits for whole outputs
    data = spec.model_dump(mode="json", exclude_none=True)
    for c in data["components"]:
        for e in c["edges"]:
            e["streaming"] = False
    plain = parse(ModelSpec, data)
    waited = request_latency(plain, CostModel(plain), cfgs, "ti2a", work)
    assert waited > 2 * streaming


def test_transfer_delay_applies_between_executors(specs: dict[str, ModelSpec], costs: dict[str, CostModel],
                                                  gpus: GPUCatalog) -> None:
    spec, cost, _, cfgs, work = _setup(specs, costs, gpus, "qwen2.5-omni", "H100-SXM", "a2a")
    mono = request_latency(spec, cost, cfgs, "a2a", work)
    split = request_latency(spec, cost, cfgs, "a2a", work,
                            placement={"audio_encoder": "e", "thinker": "t", "talker": "s", "token2wav": "s"},
                            transfer_s=0.010)
    assert split == pytest.approx(mono + 0.020)


def test_images_are_end_to_end(specs: dict[str, ModelSpec], costs: dict[str, CostModel],
                               gpus: GPUCatalog) -> None:
    spec, cost = specs["qwen-image"], costs["qwen-image"]
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    work = _one(specs, "qwen-image", "t2i-512")
    expected = (cost.prefill_time("text_encoder", cfg, int(work["text_encoder"]["prompt_tokens"]))
                + 50 * cost.dit_step_time("dit", cfg, 1, work["dit"]["tokens"])
                + cost.vae_time("vae", cfg, 1, 512 * 512))
    assert request_latency(spec, cost, _everywhere(spec, cfg), "t2i-512", work) == \
        pytest.approx(expected)


def test_solo_is_seeded_and_ordered(specs: dict[str, ModelSpec], costs: dict[str, CostModel],
                                    gpus: GPUCatalog) -> None:
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    a = solo_latencies(specs["mimo-audio"], costs["mimo-audio"], cfg, "a2t", n=40, seed=7)
    b = solo_latencies(specs["mimo-audio"], costs["mimo-audio"], cfg, "a2t", n=40, seed=7)
    assert a == b and a.metric == "ttft" and 0 < a.p50 <= a.p95


def test_default_config_takes_the_smallest_tp_that_fits(specs: dict[str, ModelSpec],
                                                        costs: dict[str, CostModel],
                                                        gpus: GPUCatalog) -> None:
    assert default_solo_config(specs["qwen2.5-omni"], costs["qwen2.5-omni"], gpus.get("H100-SXM")).tp == 1
    big = default_solo_config(specs["internvl3"], costs["internvl3"], gpus.get("L40S"))
    assert big.tp == 2  # 76 GB of weights: one 48 GB GPU is too small
    with pytest.raises(InfeasibleConfig, match="no TP degree"):
        default_solo_config(specs["qwen-image"], costs["qwen-image"], gpus.get("L40S"))
