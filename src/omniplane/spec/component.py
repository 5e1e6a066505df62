"""Model components (encoders, autoregressive LLMs, generators) and their size facts."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from omniplane.spec.base import Name, NotBool, Sourced, SpecModel

# Ranges of size facts: assumptions, each far beyond any published model (100T parameters,
# 10k layers, a million-wide hidden state), so that a slip such as 1e300 is refused at load time.
Params = Annotated[float, NotBool, Field(gt=0, le=1e14)]
Count = Annotated[int, NotBool, Field(gt=0, le=1_000_000)]
Width = Annotated[int, NotBool, Field(gt=0, le=100_000_000)]
Ratio = Annotated[float, NotBool, Field(gt=0, le=1e8)]


class ComponentKind(StrEnum):
    ENCODER = "encoder"  # image / video / audio encoder feeding an LLM
    LLM = "llm"  # autoregressive transformer: thinker, talker, MoT backbone
    GENERATOR = "generator"  # vocoder / code2wav, diffusion transformer, VAE decoder


class Modality(StrEnum):
    TEXT = "text"
    IMAGE = "image"
    VIDEO = "video"
    AUDIO = "audio"


class GeneratorKind(StrEnum):
    VOCODER = "vocoder"  # waveform from codec tokens / mel (code2wav, token2wav, BigVGAN)
    DIT = "dit"  # diffusion / flow-matching transformer, one forward per denoise step
    VAE = "vae"  # latent -> pixels decoder


class Size(Sourced):
    """Size facts of one component. ``source`` covers all numbers; ``sources`` overrides per field.

    ``params`` is the total parameter count; ``active_params`` the per-token active count of a
    MoE (defaults to ``params``). Attention shape fields are required for LLMs (KV cache).
    """

    params: Params
    active_params: Params | None = None
    layers: Count | None = None
    hidden: Width | None = None
    heads: Count | None = None
    kv_heads: Count | None = None
    head_dim: Count | None = None
    intermediate: Width | None = None
    experts: Count | None = None
    active_experts: Count | None = None
    vocab: Width | None = None
    bytes_per_param: Annotated[float, NotBool, Field(gt=0, le=16)] = 2.0
    # encoder: vision patches folded into one LLM token (spatial merge), audio tokens per second
    patches_per_token: Ratio | None = None
    patch_pixels: Width | None = None
    tokens_per_second: Ratio | None = None
    # video: consecutive frames one patch spans (temporal patch size); tiled image encoders
    # (InternViT): pixels of one tile (images become whole tiles, plus a thumbnail tile)
    frames_per_patch: Count | None = None
    tile_pixels: Width | None = None
    max_tiles: Count | None = None
    # video frames as the serving stack's processor resizes them (Qwen's smart_resize: sides
    # rounded to patch x merge, area kept within these bounds): per frame, and over all frames
    frame_min_pixels: Width | None = None
    frame_max_pixels: Width | None = None
    video_max_pixels: Width | None = None
    # encoder: embedding streams handed to the LLM per token, each of the LLM's hidden width
    # (1, plus one per DeepStack tap of Qwen3 ViTs)
    output_streams: Count | None = None
    # generator: codec frame rate, codebooks; DiT/VAE: pixels per latent token, latent channels
    frame_rate_hz: Ratio | None = None
    codebooks: Count | None = None
    # llm with a multi-token-prediction (code predictor) module: a small dense transformer run
    # once per residual codebook, one codebook after another, for every frame (Qwen3-Omni's
    # talker: codebooks - 1 = 15 passes per 12.5 Hz frame). Its weights are not in ``params``.
    mtp_params: Params | None = None
    mtp_layers: Count | None = None
    mtp_hidden: Width | None = None
    mtp_steps: Count | None = None  # sequential passes per frame; default codebooks - 1
    pixels_per_token: Ratio | None = None
    latent_channels: Count | None = None

    _unsourced: ClassVar[frozenset[str]] = frozenset({"bytes_per_param"})

    @model_validator(mode="after")
    def _moe(self) -> Size:
        if self.active_params is not None and self.active_params > self.params:
            raise ValueError(
                f"active_params ({self.active_params:g}) must be <= params ({self.params:g})"
            )
        if (self.active_experts is None) != (self.experts is None):
            raise ValueError("experts and active_experts must be given together")
        if (self.experts is not None and self.active_experts is not None
                and self.active_experts > self.experts):
            raise ValueError("active_experts must be <= experts")
        if self.heads is not None and self.kv_heads is not None and self.kv_heads > self.heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must be <= heads ({self.heads})")
        if (self.frame_min_pixels is not None and self.frame_max_pixels is not None
                and self.frame_min_pixels > self.frame_max_pixels):
            raise ValueError(f"frame_min_pixels ({self.frame_min_pixels}) must be <= frame_max_pixels "
                             f"({self.frame_max_pixels})")
        mtp = (self.mtp_params, self.mtp_layers, self.mtp_hidden)
        if (any(v is not None for v in mtp) or self.mtp_steps is not None) and (
                None in mtp or self.codebooks is None):
            raise ValueError("an MTP module needs mtp_params, mtp_layers, mtp_hidden and codebooks together")
        return self

    @property
    def mtp_passes(self) -> int:
        """Sequential MTP passes per generated frame (``mtp_steps``, by default one per residual
        codebook: codebooks - 1); 0 without an MTP module."""
        if self.mtp_params is None:
            return 0
        return self.mtp_steps if self.mtp_steps is not None else (self.codebooks or 1) - 1

    @property
    def active(self) -> float:
        return self.active_params if self.active_params is not None else self.params

    @property
    def weight_bytes(self) -> float:
        """All resident weights, the MTP module's included."""
        return (self.params + (self.mtp_params or 0.0)) * self.bytes_per_param

    @property
    def attn_head_dim(self) -> int | None:
        if self.head_dim is not None:
            return self.head_dim
        if self.hidden is not None and self.heads is not None:
            return self.hidden // self.heads
        return None

    def kv_bytes_per_token(self, kv_bytes: float = 2.0) -> float:
        """KV-cache bytes per token (all layers, K and V). Needs layers, kv_heads and a head dim."""
        hd = self.attn_head_dim
        if self.layers is None or self.kv_heads is None or hd is None:
            raise ValueError("kv_bytes_per_token needs layers, kv_heads and head_dim/hidden+heads")
        return 2.0 * self.layers * self.kv_heads * hd * kv_bytes


class Edge(SpecModel):
    """A directed data edge. ``colocatable``: the runtime can run both ends in one executor.
    ``streaming``: the downstream component starts on the first chunk the upstream one emits
    (e.g. a talker voicing thinker tokens as they come) instead of waiting for its whole output.
    ``kv``: prefill/decode disaggregation: both ends are one LLM's phases, the upstream prefills
    and emits the first token (a text type's first response), then hands its KV cache over the
    edge and the downstream decodes the rest without prefilling again."""

    to: Name
    colocatable: bool = False
    streaming: bool = False
    kv: bool = False


_REQUIRED_FOR_LLM = ("layers", "hidden", "heads", "kv_heads")


class Component(SpecModel):
    """One model part. ``edges`` are its outgoing data edges."""

    name: Name
    kind: ComponentKind
    modalities: list[Modality] = Field(default_factory=list)  # encoders: what they encode
    generator: GeneratorKind | None = None  # generators: which kind
    description: str = ""
    size: Size
    edges: list[Edge] = Field(default_factory=list)

    @model_validator(mode="after")
    def _kind_fields(self) -> Component:
        if self.kind is ComponentKind.ENCODER:
            if not self.modalities or Modality.TEXT in self.modalities:
                raise ValueError("an encoder needs modalities: one or more of image, video, audio")
            if len(set(self.modalities)) != len(self.modalities):
                raise ValueError("modalities lists a modality more than once")
        elif self.modalities:
            raise ValueError(f"modalities is only for encoders (this component is {self.kind})")
        if self.kind is ComponentKind.GENERATOR:
            if self.generator is None:
                raise ValueError("a generator needs generator: vocoder, dit or vae")
        elif self.generator is not None:
            raise ValueError(f"generator is only for generators (this component is {self.kind})")
        if self.kind is ComponentKind.LLM:
            missing = [f for f in _REQUIRED_FOR_LLM if getattr(self.size, f) is None]
            if missing:
                raise ValueError(f"an llm needs size.{', size.'.join(missing)} (for its KV cache)")
        return self

    def encodes(self, modality: Modality) -> bool:
        return modality in self.modalities

    @property
    def is_llm(self) -> bool:
        return self.kind is ComponentKind.LLM


ComponentList = Annotated[list[Component], Field(min_length=1)]
