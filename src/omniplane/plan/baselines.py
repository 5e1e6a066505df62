"""Baselines as restricted plan spaces (Cornfigurator section 6.1), evaluated by the same
pipeline, simulator, workload and latency targets as the planner.

=====================  ======================================================================
vllm                   monolithic: every component in one executor, replicated (vLLM)
vllm-omni              vLLM-Omni's stock layout: its stages, TP degrees and GPU sharing,
                       replicated to the budget (a "unit" of the layout's GPUs; see below)
full-disaggregation    every component its own node; configs, counts and routing planned
epd                    multimodal-input LLMs: encoders | prefill | decode, the prefill phase
                       handing its KV cache to the decode phase (plan.disagg); configs,
                       counts and routing planned
modserve               multimodal-input LLMs: encoders disaggregated (TP 1), the LLM at TP 4,
                       half of the GPUs to encoders and half to the LLM
=====================  ======================================================================

vLLM-Omni's expert plan is read from the catalog's stock layouts (``omniplane.spec.layout``,
``catalog/layouts/vllm-omni/<model>.yaml``: vLLM-Omni 0.30.0's pipeline topology and deploy YAML).
Each stage is a plan node with the stage's TP degree. Stages the stock layout places on the same
GPUs become one co-located executor when the model graph can host them together (Qwen3-Omni:
talker + code2wav on GPU 1; BAGEL, MiMo-Audio: every stage on GPU 0, i.e. one executor), so
one replica ("unit") uses the layout's GPU count (2 for Qwen3-Omni). Where it cannot (Qwen2.5-Omni
puts the thinker and code2wav, which share no edge, on GPU 0), each stage gets its own GPUs and
the unit is one GPU per stage (3 for Qwen2.5-Omni where the stock file uses 2); the space's
``approximation`` says which. The shipped ``max_num_seqs`` (1 for Qwen2.5-Omni) is a debugging
default; the baseline's max batch sizes are planned like the planner's (favouring the baseline).
"""

from __future__ import annotations

from dataclasses import dataclass

from omniplane.plan.disagg import split_llm
from omniplane.plan.enumerate import subplan_of
from omniplane.plan.logical import LogicalPlan, compose
from omniplane.plan.space import CountRule, Space
from omniplane.spec import ComponentKind, Modality, ModelSpec
from omniplane.spec.layout import LayoutStage
from omniplane.spec.load import load_layout


@dataclass(frozen=True)
class StageUnit:
    """vLLM-Omni's stock layout as plan nodes: one node per stage group, its TP degree, and
    what the grouping approximates (empty: nothing)."""

    nodes: tuple[frozenset[str], ...]
    tp: tuple[int, ...]
    source: str
    approximation: str


def stage_unit(model: ModelSpec) -> StageUnit | None:
    """The plan nodes of ``model``'s stock vLLM-Omni layout (None: vLLM-Omni has none)."""
    layout = load_layout(model.name)
    if layout is None:
        return None
    groups: dict[tuple[int, ...], list[LayoutStage]] = {}
    for st in layout.stages:
        groups.setdefault(layout.devices(st.stage_id), []).append(st)
    out: list[tuple[int, frozenset[str], int]] = []  # (first stage id, node, TP)
    split: list[str] = []
    for devices, stages in groups.items():
        comps = frozenset(c for st in stages for c in st.components)
        tp = max(layout.tp(st.stage_id) for st in stages)
        if len(stages) > 1 and tp == len(devices) and model.executor_type_for(comps) is not None:
            out.append((stages[0].stage_id, comps, tp))
            continue
        if len(stages) > 1:
            split.append(f"stages {[st.model_stage for st in stages]} share GPUs {list(devices)}")
        out.extend((st.stage_id, frozenset(st.components), layout.tp(st.stage_id)) for st in stages)
    out.sort(key=lambda x: x[0])
    tps = tuple(t for _, _, t in out)
    note = (f"{'; '.join(split)} in the stock layout but cannot share an executor here, so each "
            f"stage gets its own GPUs ({sum(tps)} per unit, the stock file uses {len(layout.gpus)})"
            if split else "")
    source = f"vLLM-Omni {layout.vllm_omni}: {layout.source}"
    return StageUnit(tuple(n for _, n, _ in out), tps, source, note)


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
    unit = stage_unit(model)
    if unit is None:
        return None
    lp = _plan(model, list(unit.nodes))
    if lp is None:
        return None
    tp = {n: (t,) for n, t in zip(unit.nodes, unit.tp, strict=True)}
    split = " | ".join("+".join(model.ordered(n)) for n in unit.nodes)
    note = "; ".join(x for x in (unit.approximation, unit.source) if x)
    return Space("vllm-omni", f"vLLM-Omni stock layout {split}, TP {unit.tp}, replicated", (lp,), tp,
                 _replicate(unit.tp), approximation=note)


def _is_mllm(model: ModelSpec) -> bool:
    llms = [c for c in model.components if c.kind is ComponentKind.LLM]
    encoders = [c for c in model.components if c.kind is ComponentKind.ENCODER]
    text_only = all(rt.output is Modality.TEXT for rt in model.request_types)
    only = len(llms) + len(encoders) == len(model.components)
    return len(llms) == 1 and bool(encoders) and text_only and only


def epd(model: ModelSpec) -> Space | None:
    """Encoder | prefill | decode, each its own node (a real prefill/decode split: the prefill
    phase hands its KV cache to the decode phase, ``omniplane.plan.disagg``); configs, counts
    and routing planned like the planner's."""
    if not _is_mllm(model):
        return None
    llm = next(c.name for c in model.components if c.kind is ComponentKind.LLM)
    split = split_llm(model, llm)
    lp = _plan(split.model, [frozenset([c.name]) for c in split.model.components])
    if lp is None:
        return None
    return Space("epd", "encoder | prefill | decode (prefill hands its KV cache to decode)", (lp,),
                 split=split)


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
