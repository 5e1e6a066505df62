"""vLLM-Omni's stage-config schema as its documentation states it, for checking generated
configs where vLLM-Omni itself cannot be installed (its releases pin vLLM versions whose CPU
builds do not install against this machine's torch).

Sources: https://github.com/vllm-project/vllm-omni/blob/v0.16.0/docs/configuration/stage_configs.md
(stage keys, runtime, engine_args, sampling defaults) and vllm_omni/engine/arg_utils.py of the
same tag (the fields ``OmniEngineArgs`` adds to vLLM's ``EngineArgs``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

OMNI_ENGINE_FIELDS = {
    "stage_id",
    "model_stage",
    "model_arch",
    "engine_output_type",
    "hf_config_name",
    "custom_process_next_stage_input_func",
    "stage_connector_spec",
    "async_chunk",
    "omni_kv_config",
    "quantization_config",
    "worker_type",
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Runtime(Strict):
    process: bool = True
    devices: str = "0"
    max_batch_size: int = 1


class EngineArgs(BaseModel):
    model_config = ConfigDict(extra="allow")  # any vLLM engine argument
    model_stage: str
    model_arch: str | None = None
    worker_cls: str | None = None
    worker_type: Literal["ar", "generation"] | None = None
    scheduler_cls: str | None = None
    gpu_memory_utilization: float = Field(0.8, gt=0, le=1)
    enforce_eager: bool = True
    trust_remote_code: bool = True
    engine_output_type: str = "latent"
    enable_prefix_caching: bool = False
    additional_config: dict[str, Any] | None = None


class Stage(Strict):
    stage_id: int
    stage_type: Literal["llm", "diffusion"] = "llm"
    runtime: Runtime
    engine_args: EngineArgs
    engine_input_source: list[int] | None = None
    custom_process_input_func: str | None = None
    is_comprehension: bool = False
    final_output: bool = False
    final_output_type: Literal["text", "audio", "image"] | None = None
    default_sampling_params: dict[str, Any] = Field(default_factory=dict)


class Edge(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: int = Field(alias="from")
    to: int
    window_size: int = -1


class TopRuntime(Strict):
    enabled: bool = True
    defaults: dict[str, int] = Field(default_factory=dict)
    edges: list[Edge] = Field(default_factory=list)


class StageConfig(Strict):
    stage_args: list[Stage] = Field(min_length=1)
    runtime: TopRuntime | None = None
    async_chunk: bool = False
