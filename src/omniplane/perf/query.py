"""One call's time, as ``omniplane perf predict`` answers it: a component, an executor config and
an operation (prefill, decode step, encode, denoise step, VAE decode, vocode) with its sizes.

Sizes per operation (``Call``):

============  ======================================================================
prefill       ``batch`` prompts of ``prompt_tokens`` each, after ``context_tokens`` cached
decode_step   ``batch`` sequences, each over ``context_tokens`` of KV (a talker with an MTP
              module includes its residual-codebook passes)
encode        ``batch`` inputs of ``prompt_tokens`` LLM tokens each, or of ``width x height``
              pixels (converted by the encoder's patch size and merge)
denoise_step  ``steps`` denoising steps of ``batch`` images of ``width x height``
              (``cfg`` forces classifier-free guidance; otherwise the runtime's default)
vae_decode    ``batch`` images of ``width x height``
vocode        ``batch`` streams of ``prompt_tokens`` codec frames (default one frame: the
              streaming first chunk)
============  ======================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from omniplane.perf.costmodel import CostModel
from omniplane.perf.types import ExecutorConfig
from omniplane.spec import ComponentKind, GeneratorKind

OPS = ("prefill", "decode_step", "encode", "denoise_step", "vae_decode", "vocode")


@dataclass(frozen=True)
class Call:
    op: str
    batch: int = 1
    prompt_tokens: int | None = None
    context_tokens: int | None = None
    width: int | None = None
    height: int | None = None
    steps: int = 1
    cfg: bool = False


def default_op(cost: CostModel, component: str) -> str:
    c = cost.model.component(component)
    if c.kind is ComponentKind.LLM:
        return "decode_step"
    if c.kind is ComponentKind.ENCODER:
        return "encode"
    return {GeneratorKind.DIT: "denoise_step", GeneratorKind.VAE: "vae_decode"}.get(c.generator, "vocode")  # type: ignore[arg-type]


def _allowed(cost: CostModel, component: str) -> tuple[str, ...]:
    c = cost.model.component(component)
    if c.kind is ComponentKind.LLM:
        return ("prefill", "decode_step")
    if c.kind is ComponentKind.ENCODER:
        return ("encode",)
    return ({GeneratorKind.DIT: ("denoise_step",), GeneratorKind.VAE: ("vae_decode",)}
            .get(c.generator, ("vocode",)))  # type: ignore[arg-type]


def call_time(cost: CostModel, component: str, cfg: ExecutorConfig, call: Call) -> float:
    """Seconds of one such call on one executor (``cfg.tp`` GPUs). Raises ValueError for an
    operation the component does not do, naming the ones it does."""
    allowed = _allowed(cost, component)
    if call.op not in allowed:
        c = cost.model.component(component)
        raise ValueError(f"--op {call.op}: component {component!r} is a {c.generator or c.kind}; "
                         f"expected one of: {', '.join(allowed)}")
    b = call.batch
    c = cost.model.component(component)
    if call.op == "prefill":
        p = call.prompt_tokens or 512
        ctx = call.context_tokens or 0
        return cost.prefill_time(component, cfg, b * p, b * ctx, b)
    if call.op == "decode_step":
        ctx = call.context_tokens if call.context_tokens is not None else (call.prompt_tokens or 1024)
        return cost.decode_step_time(component, cfg, b, b * max(ctx, 1))
    if call.op == "encode":
        if call.prompt_tokens is not None:
            tokens = call.prompt_tokens
        else:
            px = (call.width or 448) * (call.height or 448)
            per = (c.size.patches_per_token or 1.0) * (c.size.patch_pixels or 14) ** 2
            tokens = max(1, round(px / per))
        return cost.encoder_time(component, cfg, b, b * tokens)
    pixels = (call.width or 1024) * (call.height or 1024)
    if call.op == "denoise_step":
        latent = pixels / (c.size.pixels_per_token or 256.0)
        if call.cfg and cost.guidance_passes(component) < 2:
            cost = CostModel(cost.model, profiles=cost.profiles, calibration=cost.calibration,
                             memory=cost.memory, runtime=cost.runtime, guidance_passes={component: 2.0})
        return call.steps * cost.dit_step_time(component, cfg, b, latent)
    if call.op == "vae_decode":
        return cost.vae_time(component, cfg, b, pixels)
    frames = call.prompt_tokens or 1
    return cost.vocoder_time(component, cfg, b, frames / (c.size.frame_rate_hz or 12.5))


def source_of(cost: CostModel, component: str, cfg: ExecutorConfig, op: str) -> str:
    """Where the time comes from: a profile table, or the roofline with which calibration."""
    table_op = {"prefill": "prefill", "decode_step": "decode", "encode": "encoder",
                "denoise_step": "dit_step", "vae_decode": "vae", "vocode": "vocoder"}[op]
    if cost.source_of(component, cfg, table_op) == "profile":
        return f"profile table ({component} {table_op} on {cfg.gpu.name} x{cfg.tp})"
    kind = cost.calibration.entry(cfg.gpu)
    rt = cost.runtime
    return (f"roofline with calibration: {cfg.gpu.name} factors ({kind.source}); runtime "
            f"{rt.name!r} ({rt.source})")
