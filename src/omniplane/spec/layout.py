"""vLLM-Omni's stock stage layouts: one version-pinned catalog file per model.

vLLM-Omni splits a model into *stages* (thinker, talker, code2wav, DiT, ...). Since 0.2x a
layout has two halves: the stage topology (which model part each stage runs, its engine kind,
its inputs, its final output), fixed in Python (``PipelineConfig`` in
``vllm_omni/model_executor/models/<model>/pipeline.py``, registered under a ``model_type`` key
in ``vllm_omni/config/pipeline_registry.py``), and the deployment defaults (devices, memory
shares, batch limits, sampling defaults, connectors), in a YAML shipped in the wheel
(``vllm_omni/deploy/<model>.yaml``).

A layout file (``catalog/layouts/vllm-omni/<model>.yaml``, ``kind: vllm-omni-layout``) holds
both for one omniplane catalog model at one vLLM-Omni version: the topology as ``stages``
(plus which omniplane components each stage runs, omniplane's reading of the model code) and
the stock deploy YAML as data under ``deploy`` (comments dropped). It is the one table the
planner's vLLM-Omni baseline (:mod:`omniplane.plan.baselines`), the stage-config writer
(:mod:`omniplane.vllm.stage_config`) and deploy (:mod:`omniplane.deploy.vllm_omni`) read; the
vLLM-Omni tests compare it with the installed wheel (``tests/vllm/test_layouts_match_wheel.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from omniplane.spec.base import Document, Name, Source, SpecModel
from omniplane.spec.catalog import catalog_layout_paths

Execution = Literal["llm_ar", "llm_generation", "diffusion"]


class LayoutStage(SpecModel):
    """One stage of vLLM-Omni's pipeline topology (``StagePipelineConfig``)."""

    stage_id: int = Field(ge=0)
    model_stage: str
    execution: Execution  # StageExecutionType
    components: list[Name] = Field(min_length=1)  # omniplane components this stage runs
    input_sources: list[int] = Field(default_factory=list)
    final_output_type: Literal["text", "audio", "image"] | None = None


class VllmOmniLayout(Document):
    """A model's stock vLLM-Omni layout at one version (module docstring)."""

    kind: Literal["vllm-omni-layout"]
    model: Name  # omniplane catalog model
    vllm_omni: str = Field(pattern=r"^\d+\.\d+\.\d+")  # the release the files come from
    hf_id: str
    model_type: str  # vLLM-Omni's pipeline registry key
    model_arch: str
    source: Source  # the stock deploy YAML at that release
    sources: dict[str, Source] = Field(default_factory=dict)  # pipeline module, wheel, notes
    stages: list[LayoutStage] = Field(min_length=1)
    deploy: dict[str, Any] = Field(default_factory=dict)  # the stock deploy YAML, as data

    @model_validator(mode="after")
    def _check(self) -> VllmOmniLayout:
        ids = [s.stage_id for s in self.stages]
        if ids != sorted(set(ids)):
            raise ValueError(f"stages: stage ids must be unique and ascending, got {ids}")
        for s in self.stages:
            bad = [i for i in s.input_sources if i not in ids or i >= s.stage_id]
            if bad:
                raise ValueError(f"stages[{s.stage_id}].input_sources: {bad} are not earlier stages")
        comps = [c for s in self.stages for c in s.components]
        if len(comps) != len(set(comps)):
            raise ValueError(f"stages: a component is in two stages ({comps})")
        deployed = [d.get("stage_id") for d in self.deploy.get("stages", []) if isinstance(d, dict)]
        unknown = [i for i in deployed if i not in ids]
        if unknown:
            raise ValueError(f"deploy.stages: stage ids {unknown} are not in the topology {ids}")
        return self

    # ---- the deploy half, per stage (vLLM-Omni's StageDeployConfig defaults when unset) ----
    def stage_deploy(self, stage_id: int) -> dict[str, Any]:
        """The stock deploy YAML's entry for ``stage_id`` (empty: every field at its default)."""
        for d in self.deploy.get("stages", []):
            if isinstance(d, dict) and d.get("stage_id") == stage_id:
                return d
        return {}

    def devices(self, stage_id: int) -> tuple[int, ...]:
        """The stage's devices (``devices: "0,1"``); vLLM-Omni's default is device 0."""
        text = str(self.stage_deploy(stage_id).get("devices", "0"))
        return tuple(int(x) for x in text.split(",") if x.strip())

    def tp(self, stage_id: int) -> int:
        return int(self.stage_deploy(stage_id).get("tensor_parallel_size") or 1)

    def memory_fraction(self, stage_id: int) -> float | None:
        v = self.stage_deploy(stage_id).get("gpu_memory_utilization")
        return None if v is None else float(v)

    def stage_of(self, component: str) -> LayoutStage:
        for s in self.stages:
            if component in s.components:
                return s
        raise KeyError(f"{self.model}: no vLLM-Omni stage runs component {component!r}")

    @property
    def gpus(self) -> tuple[int, ...]:
        """Every device the layout uses: one copy of it ("unit") needs this many GPUs."""
        return tuple(sorted({d for s in self.stages for d in self.devices(s.stage_id)}))


def layout_models() -> list[str]:
    """Catalog models with a stock vLLM-Omni layout."""
    return [p.stem for p in catalog_layout_paths()]
