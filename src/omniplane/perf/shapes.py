"""Per-component size facts the roofline needs, derived once from a component's ``Size``.

Every quantity here is arithmetic on the model spec (parameter counts, layer shapes); the
approximations are stated where they are made and repeated in docs/reference/perf.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from omniplane.spec import Component, ComponentKind, GeneratorKind, ModelSpec

KV_BYTES_PER_ELEMENT = 2.0  # assumption: BF16/FP16 KV cache (vLLM default kv_cache_dtype="auto")
ACT_BYTES = 2.0  # assumption: BF16 activations

# derived: a Stable-Diffusion/FLUX-style VAE decoder (block channels 512, 512, 256, 128 at 1x, 2x,
# 4x, 8x the latent resolution, 3 ResNet blocks per level) applies its 49.5M parameters to
# 302M parameter-positions per latent position: 24.7M x1 + 16.6M x4 + 6.6M x16 + 1.65M x64.
# 302 / 49.5 = 6.1 (see docs/reference/perf.md, "VAE decode").
VAE_WORK_PER_LATENT = 6.1

# derived: a HiFi-GAN/BigVGAN-style vocoder halving its channels at each of four upsampling
# stages (x8, x5, x4, x3) applies its parameters to 35.5 / 1.33 = 26.7 parameter-positions per
# codec frame (see docs/reference/perf.md, "Vocoder").
VOCODER_WORK_PER_FRAME = 26.7


@dataclass(frozen=True)
class Shape:
    """Derived facts of one component (all per executor, before dividing over GPUs)."""

    name: str
    kind: ComponentKind
    generator: GeneratorKind | None
    params: float
    weight_bytes: float
    layers: int
    hidden: int
    attn_dim: int  # query heads x head dim
    matmul_params: float  # parameters one token multiplies through (active params for MoE)
    kv_bytes_per_token: float  # all layers, K and V; 0 for non-LLMs
    kv_heads: int
    # MoE: weight bytes outside experts and of all experts (dense: shared = all, experts = 0)
    shared_bytes: float
    expert_bytes: float
    experts: int
    active_experts: int
    seq_per_token: float  # encoders: sequence positions per output token (patches folded)
    frame_rate_hz: float
    pixels_per_token: float
    # encoders: input pixels (image, or video frames) per output token, 0 for audio; audio
    # seconds per output token, 0 for vision (host preprocessing scales with these)
    input_pixels_per_token: float = 0.0
    audio_seconds_per_token: float = 0.0
    # encoders: bytes of embeddings handed to the LLM per output token (set by the cost model,
    # which knows the LLM: its hidden x the encoder's output streams x 2 B)
    output_bytes_per_token: float = 0.0
    # LLM with a multi-token-prediction module: sequential passes per emitted frame, the
    # module's parameters and layers (0 without one)
    mtp_passes: int = 0
    mtp_params: float = 0.0
    mtp_layers: int = 0
    mtp_bytes: float = 0.0

    @property
    def attn_flops_per_pair(self) -> float:
        """FLOPs of one (query, key) pair over all layers: QK^T and PV, 2 FLOPs per MAC."""
        return 4.0 * self.layers * self.attn_dim

    def expert_fraction(self, tokens: float) -> float:
        """Expected fraction of experts a layer touches for ``tokens`` tokens routed top-k of E:
        1 - (1 - k/E)^tokens (independent uniform routing)."""
        if self.experts <= 0 or tokens <= 0:
            return 0.0 if self.experts > 0 else 1.0
        return float(1.0 - (1.0 - self.active_experts / self.experts) ** tokens)


def shape_of(c: Component) -> Shape:
    s = c.size
    bpp = s.bytes_per_param
    layers = s.layers or 1
    hidden = s.hidden or 0
    hd = s.attn_head_dim or 0
    attn_dim = (s.heads or 0) * hd if s.heads else hidden
    shared, expert = s.params * bpp, 0.0  # the MTP module's weights are priced separately
    experts = active_experts = 0
    if s.experts is not None and s.active_experts is not None and s.experts > s.active_experts:
        per_expert = (s.params - s.active) / (s.experts - s.active_experts)
        expert = per_expert * s.experts * bpp
        shared = s.params * bpp - expert
        experts, active_experts = s.experts, s.active_experts
    kv = 0.0
    if c.kind is ComponentKind.LLM:
        kv = s.kv_bytes_per_token(KV_BYTES_PER_ELEMENT)
    return Shape(
        name=c.name,
        kind=c.kind,
        generator=c.generator,
        params=s.params,
        weight_bytes=s.weight_bytes,
        layers=layers,
        hidden=hidden,
        attn_dim=attn_dim,
        matmul_params=_matmul_params(c),
        kv_bytes_per_token=kv,
        kv_heads=s.kv_heads or s.heads or 1,
        shared_bytes=shared,
        expert_bytes=expert,
        experts=experts,
        active_experts=active_experts,
        seq_per_token=s.patches_per_token or 1.0,
        frame_rate_hz=s.frame_rate_hz or 12.5,
        pixels_per_token=s.pixels_per_token or 256.0,
        input_pixels_per_token=(s.patches_per_token or 1.0) * s.patch_pixels ** 2 if s.patch_pixels else 0.0,
        audio_seconds_per_token=1.0 / s.tokens_per_second if s.tokens_per_second else 0.0,
        mtp_passes=s.mtp_passes,
        mtp_params=s.mtp_params or 0.0,
        mtp_layers=s.mtp_layers or 0,
        mtp_bytes=(s.mtp_params or 0.0) * bpp,
    )


def _matmul_params(c: Component) -> float:
    """Parameters each token is multiplied through.

    LLMs and encoders: the active parameter count (embeddings included: a deliberate upper bound
    of at most vocab x hidden / active). DiTs: from the layer shapes when given,
    layers x (4 hidden x attn_dim + 2 hidden x intermediate) -- a non-gated MLP, and in a
    dual-stream MMDiT each token passes through one stream's weights; the per-sample
    modulation (adaLN) weights are not per-token. Falls back to all parameters.
    """
    s = c.size
    if c.generator is GeneratorKind.DIT and s.layers and s.hidden and s.intermediate:
        hd = s.attn_head_dim or 0
        attn_dim = (s.heads or 0) * hd if s.heads else s.hidden
        per_layer = 4.0 * s.hidden * attn_dim + 2.0 * s.hidden * s.intermediate
        return min(s.params, s.layers * per_layer)
    return s.active


def with_output_bytes(model: ModelSpec, shape: Shape) -> Shape:
    """An encoder's shape with the bytes of embeddings it hands the LLM per output token: the
    hidden width of the LLM its edges lead to (the projector's output) x its output streams
    (1, plus one per DeepStack tap) x ``ACT_BYTES``. Other shapes unchanged."""
    if shape.kind is not ComponentKind.ENCODER:
        return shape
    comp = model.component(shape.name)
    llm = next((model.component(e.to) for e in comp.edges if model.component(e.to).is_llm), None)
    if llm is None or llm.size.hidden is None:
        return shape
    streams = comp.size.output_streams or 1
    return replace(shape, output_bytes_per_token=float(llm.size.hidden * streams * ACT_BYTES))
