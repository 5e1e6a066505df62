"""Baselines as restricted plan spaces."""

from __future__ import annotations

from omniplane.plan.baselines import VLLM_OMNI, baseline_spaces
from omniplane.spec import load_model


def test_each_model_gets_the_baselines_that_apply() -> None:
    names = {m: [s.name for s in baseline_spaces(load_model(m))]
             for m in ("qwen3-omni", "qwen2.5-omni", "qwen-image", "qwen3-vl", "internvl3")}
    assert names["qwen3-omni"] == ["vllm", "vllm-omni", "full-disaggregation"]
    assert names["qwen-image"] == ["vllm", "vllm-omni", "full-disaggregation"]
    assert names["qwen3-vl"] == ["vllm", "full-disaggregation", "epd", "modserve"]
    assert "vllm-omni" in names["qwen2.5-omni"]


def test_vllm_omni_replicates_its_stage_unit_to_the_budget() -> None:
    model = load_model("qwen3-omni")
    space = next(s for s in baseline_spaces(model) if s.name == "vllm-omni")
    assert space.logical is not None and space.counts is not None
    lp = space.logical[0]
    assert [sorted(n) for n in lp.nodes] == [sorted(s) for s in VLLM_OMNI["qwen3-omni"].stages]
    tps = tuple(space.tp[n][0] for n in lp.nodes)
    assert tps == (2, 1, 1)
    assert space.counts(tps, 16) == (4, 4, 4)
    assert space.counts(tps, 8) == (2, 2, 2)
    assert space.counts(tps, 3) is None


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
