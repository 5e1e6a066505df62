"""Serving runtimes: the host- and launch-side costs of the stack a component runs in.

The roofline (:mod:`omniplane.perf.roofline`) prices what the GPU must do. Small models at small
batch are not bound by that: kernel launches, Python between kernels, sampling, and the host
work of each request set their speed (a 0.3B-active talker step at batch 1 reads 0.6 GB, 0.4 ms
on an A100, and takes 7 ms in the Qwen3-Omni report). A :class:`Runtime` names those costs,
by component kind, for one serving stack; they are the same for every model and GPU kind.

Three runtimes ship in ``perf/data/calibration.json`` (``runtimes``):

``roofline``   none of these costs: the GPU kind's efficiency factors alone (what those
               factors are fitted with; the Splitwise and Vidur points are priced with it)
``vllm``       vLLM / vLLM-Omni as the Qwen3-Omni report ran it (torch.compile and CUDA graphs
               for the MTP module and the codec decoder; code predictor batched over sequences);
               fitted to the report's per-component table
``cornserve``  the stack Cornfigurator's Table 2 was measured on (Cornserve: every vLLM executor
               started with ``--enforce-eager``, encoders in eager PyTorch, embeddings and hidden
               states handed over through the sidecar); fitted to Table 2

Each factor says where it comes from (``factor_sources``). See docs/reference/perf.md, "Runtimes".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

NUMERIC = ("step_s", "prompt_token_s", "request_s", "mtp_pass_s", "mtp_seq_pass_s", "vocoder_call_s",
           "encoder_s_per_mpx", "encoder_s_per_audio_s", "encoder_s_per_output_mb")


@dataclass(frozen=True)
class Runtime:
    """Host- and launch-side costs of one serving stack (seconds; see the module docstring).

    layer_s                time per transformer layer per forward (launches, Python between
                           kernels); ``None`` keeps the GPU kind's ``layer_s`` (CUDA-graph
                           replay). Applies to LLM iterations, MTP passes, encoder, DiT, VAE
                           and vocoder forwards.
    step_s                 LLM: fixed host time per iteration (scheduling, sampling, output)
    step_s_by_gpu          ``step_s`` per GPU kind name where one testbed's host differs
                           (e.g. ``vllm-omni-paper-testbed``, fitted per GPU); other kinds
                           keep ``step_s``
    prompt_token_s         LLM: host time per prefilled token (e.g. embeddings handed over)
    request_s              LLM: host time per request prefilled in an iteration
    mtp_pass_s             fixed host time per MTP pass (sampling and embedding one codebook)
    mtp_seq_pass_s         host time per MTP pass per sequence emitting a frame (per-request
                           payloads, per-row sampling), batched or not; it overlaps the GPU's
                           work (async scheduling), so an iteration takes the larger of the two
    mtp_batched            MTP passes run over all sequences of the step at once; otherwise
                           one sequence after another
    vocoder_call_s         fixed time per vocoder call
    vocoder_chunk_frames   codec frames one vocoder call voices at most
    encoder_s_per_mpx      encoder host preprocessing per megapixel of image or video frames
    encoder_s_per_audio_s  encoder host preprocessing per second of audio
    encoder_s_per_output_mb  encoder: time per MB of output embeddings handed to the LLM
                           (device-to-host copy and send), serial with the forward
    guidance               classifier-free guidance where the model's defaults use it
                           (``GUIDANCE_PASSES``); False: one forward per denoising step
    memory                 LLM: fraction of peak DRAM bandwidth its iterations reach (the
                           runtime's kernels); ``None`` keeps the GPU kind's ``memory``
    per_seq_s              LLM: time per sequence emitting a token (sampling, detokenising,
                           output); ``None`` keeps the GPU kind's ``per_seq_s``
    moe_expert_pool        MoE LLMs: the fraction of a layer's experts the tokens of one
                           iteration route among (1: uniform routing over all experts; below 1:
                           skewed routing, the batch's tokens draw their top-k from a smaller
                           set of popular experts, so fewer distinct experts are read); at
                           least top-k / experts
    """

    name: str
    source: str
    layer_s: float | None = None
    step_s: float = 0.0
    step_s_by_gpu: Mapping[str, float] = field(default_factory=dict)
    prompt_token_s: float = 0.0
    request_s: float = 0.0
    mtp_pass_s: float = 0.0
    mtp_seq_pass_s: float = 0.0
    mtp_batched: bool = True
    vocoder_call_s: float = 0.0
    vocoder_chunk_frames: int = 1_000_000
    encoder_s_per_mpx: float = 0.0
    encoder_s_per_audio_s: float = 0.0
    encoder_s_per_output_mb: float = 0.0
    guidance: bool = True
    memory: float | None = None
    per_seq_s: float | None = None
    moe_expert_pool: float = 1.0
    factor_sources: Mapping[str, str] = field(default_factory=dict)
    fitted_to: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in NUMERIC:
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0.0):
                raise ValueError(f"Runtime {self.name!r}: {name} must be a finite number >= 0, got {v!r}")
        if self.layer_s is not None and not (math.isfinite(self.layer_s) and self.layer_s >= 0.0):
            raise ValueError(f"Runtime {self.name!r}: layer_s must be null or a finite number >= 0")
        for gpu, v in dict(self.step_s_by_gpu).items():
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0.0):
                raise ValueError(f"Runtime {self.name!r}: step_s_by_gpu.{gpu} must be a finite number >= 0, "
                                 f"got {v!r}")
        mem = self.memory
        if mem is not None and not (isinstance(mem, int | float) and 0.0 < mem <= 1.0):
            raise ValueError(f"Runtime {self.name!r}: memory must be null or in (0, 1], got {self.memory!r}")
        if self.per_seq_s is not None and not (math.isfinite(self.per_seq_s)
                                               and self.per_seq_s >= 0.0):
            raise ValueError(f"Runtime {self.name!r}: per_seq_s must be null or a finite number >= 0")
        if not (isinstance(self.moe_expert_pool, int | float) and 0.0 < self.moe_expert_pool <= 1.0):
            raise ValueError(f"Runtime {self.name!r}: moe_expert_pool must be in (0, 1], "
                             f"got {self.moe_expert_pool!r}")
        if self.vocoder_chunk_frames < 1:
            raise ValueError(f"Runtime {self.name!r}: vocoder_chunk_frames must be >= 1")
        object.__setattr__(self, "factor_sources", MappingProxyType(dict(self.factor_sources)))
        object.__setattr__(self, "step_s_by_gpu", MappingProxyType(dict(self.step_s_by_gpu)))

    def step_s_on(self, gpu: str) -> float:
        """The LLM's fixed host time per iteration on GPU kind ``gpu``."""
        return float(self.step_s_by_gpu.get(gpu, self.step_s))

    def source_of(self, factor: str) -> str:
        return self.factor_sources.get(factor, self.source)

    def with_factors(self, **values: Any) -> Runtime:
        """A copy with some factors replaced (the fit's trial runtimes)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(values)
        return Runtime(**d)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}
        d["factor_sources"] = dict(self.factor_sources)
        d["step_s_by_gpu"] = dict(self.step_s_by_gpu)
        d["fitted_to"] = list(self.fitted_to)
        return d

    @classmethod
    def from_json(cls, name: str, d: Any, file: str = "<calibration>") -> Runtime:
        where = f"{file}: runtimes.{name}"
        if not isinstance(d, Mapping) or "source" not in d:
            raise ValueError(f"{where}: expected an object with at least 'source'")
        known = {f.name for f in fields(cls)} - {"name"}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(known)}")
        values = dict(d)
        values["fitted_to"] = tuple(values.get("fitted_to", ()))
        values["factor_sources"] = {str(k): str(v) for k, v in dict(values.get("factor_sources", {})).items()}
        values["step_s_by_gpu"] = {str(k): v for k, v in dict(values.get("step_s_by_gpu", {})).items()}
        try:
            return cls(name=name, **values)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None


ROOFLINE = Runtime("roofline", "the GPU kind's efficiency factors alone: no runtime costs")


def plan_pricing(meta: Mapping[str, Any] | None, where: str = "plan") -> str | None:
    """The runtime that priced a plan: ``meta.runtime.priced_with`` as ``omniplane plan`` writes it
    (None where absent: plans from before it were priced with the calibration's default). A
    command that prices a plan again (simulate, rehearse, the emulated engine) uses it, so that it
    reproduces the planner's numbers."""
    rt = (meta or {}).get("runtime")
    value = rt.get("priced_with") if isinstance(rt, Mapping) else None
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}: meta.runtime.priced_with: expected a runtime name, got {value!r}")
    return value
