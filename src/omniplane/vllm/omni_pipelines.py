"""omniplane's variants of vLLM-Omni's pipelines: the stock topology with omniplane's
scheduler classes on every LLM stage.

Since vLLM-Omni 0.2x a stage's scheduler class is part of the pipeline topology
(``StagePipelineConfig.scheduler_cls``, ``vllm_omni/config/stage_config.py``), not of the deploy
YAML: the loader overwrites a ``scheduler_cls`` written there. A deploy YAML picks a registered
topology with its top-level ``pipeline:`` key, so omniplane registers, for each catalog layout
(:mod:`omniplane.spec.layout`), the key ``omniplane_<model_type>``: vLLM-Omni's own pipeline for
that model (resolved through its registry, so hf-config-dependent variants stay as vLLM-Omni
picks them) with ``scheduler_cls`` set to :data:`SCHEDULERS` on its autoregressive and
generation stages; everything else is vLLM-Omni's. The files ``omniplane vllm-omni config`` and
``omniplane deploy --engine vllm-omni`` write name that key.

:func:`register` runs from omniplane's plugin (:mod:`omniplane.vllm.plugin`) in every vLLM /
vLLM-Omni process, and may be called again (idempotent). No vLLM-Omni import at module level.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from omniplane.spec.layout import layout_models
from omniplane.spec.load import load_layout

PREFIX = "omniplane_"
SCHEDULERS = {
    "llm_ar": "omniplane.vllm.omni_scheduler.OmniplaneOmniARScheduler",
    "llm_generation": "omniplane.vllm.omni_scheduler.OmniplaneOmniGenerationScheduler",
}


def pipeline_key(model_type: str) -> str:
    """The registry key of omniplane's variant of vLLM-Omni's pipeline ``model_type``."""
    return PREFIX + model_type


def variant(pipeline: Any) -> Any:
    """``pipeline`` (a vLLM-Omni ``PipelineConfig``) with omniplane's scheduler on each AR /
    generation stage that uses vLLM-Omni's stock scheduler (``scheduler_cls`` unset). Its
    ``model_type`` stays vLLM-Omni's: code that special-cases a model keeps doing so."""
    stages = []
    for st in pipeline.stages:
        kind = getattr(st.execution_type, "value", st.execution_type)
        if kind in SCHEDULERS and st.scheduler_cls is None:
            st = dataclasses.replace(st, scheduler_cls=SCHEDULERS[kind])
        stages.append(st)
    return dataclasses.replace(pipeline, stages=tuple(stages))


def register() -> list[str]:
    """Register ``omniplane_<model_type>`` for every catalog layout whose pipeline the installed
    vLLM-Omni has; returns the keys registered by this call (none when already there)."""
    from vllm_omni.config import pipeline_registry as reg

    added = []
    for model in layout_models():
        layout = load_layout(model)
        if layout is None or layout.model_type not in reg.OMNI_PIPELINES:
            continue  # generic diffusion (no LLM stage) or a model this vLLM-Omni lacks
        key = pipeline_key(layout.model_type)
        if key in reg.OMNI_PIPELINES:
            continue

        def resolve(hf_config: Any, base: str = layout.model_type) -> Any:
            pipeline = reg.resolve_pipeline_config(base, hf_config)
            return None if pipeline is None else variant(pipeline)

        reg.register_pipeline(resolve, model_type=key)
        added.append(key)
    return added
