"""Baselines as restricted plan spaces."""

from __future__ import annotations

from omniplane.plan.baselines import baseline_spaces, stage_unit
from omniplane.spec import load_model
from omniplane.spec.load import load_layout


def test_each_model_gets_the_baselines_that_apply() -> None:
    names = {m: [s.name for s in baseline_spaces(load_model(m))]
             for m in ("qwen3-omni", "qwen2.5-omni", "qwen-image", "qwen3-vl", "internvl3")}
    assert names["qwen3-omni"] == ["vllm", "vllm-omni", "full-disaggregation"]
    assert names["qwen-image"] == ["vllm", "vllm-omni", "full-disaggregation"]
    assert names["qwen3-vl"] == ["vllm", "full-disaggregation", "epd", "modserve"]
    assert "vllm-omni" in names["qwen2.5-omni"]


def test_vllm_omni_replicates_its_stock_unit_to_the_budget() -> None:
    """Qwen3-Omni's stock layout (vLLM-Omni 0.30.0): thinker with the encoders on GPU 0, talker and
    code2wav sharing GPU 1, so one unit is 2 GPUs: two plan nodes at TP 1, the second co-located."""
    model = load_model("qwen3-omni")
    layout = load_layout("qwen3-omni")
    assert layout is not None and layout.gpus == (0, 1)
    space = next(s for s in baseline_spaces(model) if s.name == "vllm-omni")
    assert space.logical is not None and space.counts is not None
    lp = space.logical[0]
    assert sorted(sorted(n) for n in lp.nodes) == [
        ["audio_encoder", "image_encoder", "thinker", "video_encoder"], ["code2wav", "talker"]]
    tps = tuple(space.tp[n][0] for n in lp.nodes)
    assert tps == (1, 1) and not space.approximation.startswith("stages")
    assert space.counts(tps, 16) == (8, 8)
    assert space.counts(tps, 8) == (4, 4)
    assert space.counts(tps, 1) is None


def test_vllm_omni_stages_that_cannot_share_an_executor_get_their_own_gpus() -> None:
    """Qwen2.5-Omni puts thinker and code2wav on GPU 0; they share no edge, so the baseline gives
    each stage its own GPU (3 per unit) and says so."""
    unit = stage_unit(load_model("qwen2.5-omni"))
    assert unit is not None
    assert [sorted(n) for n in unit.nodes] == [
        ["audio_encoder", "thinker", "vision_encoder"], ["talker"], ["token2wav"]]
    assert unit.tp == (1, 1, 1)
    assert "share GPUs [0]" in unit.approximation
    assert "3 per unit, the stock file uses 2" in unit.approximation
    # models whose stages all share GPU 0 are one executor
    for name in ("bagel", "mimo-audio", "qwen-image"):
        u = stage_unit(load_model(name))
        assert u is not None and len(u.nodes) == 1 and u.tp == (1,), name
    assert stage_unit(load_model("qwen3-vl")) is None  # not a vLLM-Omni pipeline


def test_modserve_splits_the_gpus_evenly_at_tp4() -> None:
    model = load_model("internvl3")
    space = next(s for s in baseline_spaces(model) if s.name == "modserve")
    assert space.logical is not None and space.counts is not None
    lp = space.logical[0]
    tps = tuple(space.tp[n][0] for n in lp.nodes)
    counts = space.counts(tps, 16)
    assert counts is not None
    gpus = {"+".join(sorted(n)): c * t for n, c, t in zip(lp.nodes, counts, tps, strict=True)}
    assert gpus == {"vision_encoder": 8, "llm": 8}
    assert space.counts(tps, 4) is None  # half of 4 GPUs cannot hold a TP-4 LLM
