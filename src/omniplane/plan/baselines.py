"""Baselines as restricted plan spaces (Cornfigurator section 6.1), evaluated by the same
pipeline, simulator, workload and latency targets as the planner.

=====================  ======================================================================
vllm                   monolithic: every component in one executor, replicated (vLLM)
vllm-omni              vLLM-Omni's default stage split, its TP degrees, one executor per
                       stage replicated to the budget (a "unit" of the stage config's GPUs)
full-disaggregation    every component its own node; configs, counts and routing planned
epd                    multimodal-input LLMs: encoders | LLM. The simulator has no prefill /
                       decode split, so prefill and decode stay together ("E | PD"): for a
                       one-LLM model this is the full-disaggregation space
modserve               multimodal-input LLMs: encoders disaggregated (TP 1), the LLM at TP 4,
                       half of the GPUs to encoders and half to the LLM
=====================  ======================================================================

vLLM-Omni stage layouts (read from its shipped stage configs):

* Qwen3-Omni: thinker (with the encoders) at TP 2 on GPUs 0-1, talker on GPU 1, code2wav on
  GPU 0 (``vllm_omni/model_executor/stage_configs/qwen3_omni_moe.yaml``).
* Qwen2.5-Omni: thinker (with the encoders), talker, token2wav, all on one GPU at memory
  fractions 0.32 / 0.32 / 0.3 (``qwen2_5_omni.yaml``).
* Qwen-Image: text encoder on GPU 0, diffusion (DiT + VAE) on GPU 1 (``QwenImagePipeline.yaml``).

Approximation: the stage configs co-locate stages on shared GPUs; our plans give each stage
executor its own GPUs (unit = the stages' TP degrees summed: 4 GPUs for Qwen3-Omni, 3 for
Qwen2.5-Omni, 2 for Qwen-Image). The shipped ``max_batch_size: 1`` is a debugging default;
the baseline's max batch sizes are planned like the planner's (favouring the baseline).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from omniplane.plan.enumerate import subplan_of
from omniplane.plan.logical import LogicalPlan, compose
from omniplane.plan.space import CountRule, Space
from omniplane.spec import ComponentKind, Modality, ModelSpec

VLLM_OMNI_SRC = "https://github.com/vllm-project/vllm-omni/tree/main/vllm_omni/model_executor/stage_configs"


@dataclass(frozen=True)
class StageLayout:
    stages: tuple[tuple[str, ...], ...]
    tp: tuple[int, ...]
    source: str


VLLM_OMNI: Mapping[str, StageLayout] = {
    "qwen3-omni": StageLayout(
        (("audio_encoder", "image_encoder", "video_encoder", "thinker"), ("talker",), ("code2wav",)),
        (2, 1, 1), f"{VLLM_OMNI_SRC}/qwen3_omni_moe.yaml"),
    "qwen2.5-omni": StageLayout(
        (("vision_encoder", "audio_encoder", "thinker"), ("talker",), ("token2wav",)),
        (1, 1, 1), f"{VLLM_OMNI_SRC}/qwen2_5_omni.yaml"),
    "qwen-image": StageLayout((("text_encoder",), ("dit", "vae")), (1, 1),
                              f"{VLLM_OMNI_SRC}/QwenImagePipeline.yaml"),
}
MODSERVE_LLM_TP = 4  # ModServe's configuration in Cornfigurator section 6.3 ("TP=4")


def _plan(model: ModelSpec, nodes: list[frozenset[str]]) -> LogicalPlan | None:
    if any(model.executor_type_for(n) is None for n in nodes):
        return None
    sp = subplan_of(model, tuple(nodes))
    return compose((sp,), len(model.type_names))


def monolithic(model: ModelSpec) -> Space | None:
    lp = _plan(model, [frozenset(c.name for c in model.components)])
    if lp is None:
        return None
    return Space("vllm", "monolithic (vLLM): all components in one executor, replicated", (lp,))


def full_disaggregation(model: ModelSpec) -> Space | None:
    lp = _plan(model, [frozenset([c.name]) for c in model.components])
    if lp is None:
        return None
    return Space("full-disaggregation", "every component its own node (otherwise full planning)", (lp,))


def _replicate(unit: tuple[int, ...]) -> CountRule:
    per_unit = sum(unit)

    def rule(tps: tuple[int, ...], budget: int) -> tuple[int, ...] | None:
        k = budget // per_unit
        return tuple(k for _ in tps) if k >= 1 else None

    return rule


def vllm_omni(model: ModelSpec) -> Space | None:
    layout = VLLM_OMNI.get(model.name)
    if layout is None:
        return None
    nodes = [frozenset(s) for s in layout.stages]
    lp = _plan(model, nodes)
    if lp is None:
        return None
    tp = {n: (t,) for n, t in zip(nodes, layout.tp, strict=True)}
    return Space("vllm-omni", f"vLLM-Omni stage split {' | '.join('+'.join(s) for s in layout.stages)}, "
                 f"TP {layout.tp}, replicated", (lp,), tp, _replicate(layout.tp),
                 approximation=f"stages on dedicated GPUs (the stage config shares them); {layout.source}")


def _is_mllm(model: ModelSpec) -> bool:
    llms = [c for c in model.components if c.kind is ComponentKind.LLM]
    encoders = [c for c in model.components if c.kind is ComponentKind.ENCODER]
    text_only = all(rt.output is Modality.TEXT for rt in model.request_types)
    only = len(llms) + len(encoders) == len(model.components)
    return len(llms) == 1 and bool(encoders) and text_only and only


def epd(model: ModelSpec) -> Space | None:
    if not _is_mllm(model):
        return None
    lp = _plan(model, [frozenset([c.name]) for c in model.components])
    if lp is None:
        return None
    return Space("epd", "encoder | prefill+decode (EPD without the P/D split)", (lp,),
                 approximation="the simulator has no prefill/decode disaggregation: E | PD")


def modserve(model: ModelSpec) -> Space | None:
    if not _is_mllm(model):
        return None
    nodes = [frozenset([c.name]) for c in model.components]
    lp = _plan(model, nodes)
    if lp is None:
        return None
    llm = next(c.name for c in model.components if c.kind is ComponentKind.LLM)
    tp = {n: ((MODSERVE_LLM_TP,) if llm in n else (1,)) for n in nodes}
    is_llm = [llm in n for n in lp.nodes]

    def rule(tps: tuple[int, ...], budget: int) -> tuple[int, ...] | None:
        half = budget // 2
        n_enc = sum(1 for x in is_llm if not x)
        out = []
        for llm_node, t in zip(is_llm, tps, strict=True):
            out.append(half // t if llm_node else (budget - half) // max(n_enc, 1) // t)
        return tuple(out) if min(out) >= 1 else None

    return Space("modserve", "encoders disaggregated, LLM TP 4, equal encoder/LLM GPU split", (lp,), tp, rule)


def baseline_spaces(model: ModelSpec) -> list[Space]:
    """Every baseline that applies to ``model`` (one factory, in a fixed order)."""
    makers = (monolithic, vllm_omni, full_disaggregation, epd, modserve)
    out = []
    seen: set[str] = set()
    for make in makers:
        space = make(model)
        if space is None or space.name in seen:
            continue
        seen.add(space.name)
        out.append(space)
    return out
