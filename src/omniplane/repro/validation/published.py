"""Single published measurements (listed with their sources in data/README.md).

sglang's multimodal CI baseline (perf_baselines/h100.json, Apache-2.0) runs Qwen-Image and
FLUX.1-dev text-to-image at 1024x1024 with 50 steps (testcase_configs.py); sglang's Qwen-Image
defaults use true classifier-free guidance (negative prompt " ", guidance 4.0) and offload the
text encoder to host memory (``text_encoder_cpu_offload=True``), which the model does not
represent: those points carry the ``config-differs`` flag.
"""

from __future__ import annotations

from omniplane.perf.types import ExecutorConfig
from omniplane.repro.validation.points import (
    Context,
    Flag,
    Models,
    NotExpressible,
    Point,
    Predictor,
    Role,
)

SGLANG = ("https://github.com/sgl-project/sglang python/sglang/multimodal_gen/test/server/"
          "perf_baselines/h100.json (Apache-2.0; data/README.md)")
BAGEL_ISSUE = "https://github.com/ByteDance-Seed/Bagel/issues/4 (data/README.md)"

IMG = 1024 * 1024
QI_TOKENS = IMG // 256  # Qwen-Image / FLUX / BAGEL latent tokens at 16x16 px each
FLUX_TEXT = 512  # FLUX.1-dev joint attention over 512 T5 tokens (max_sequence_length 512)
QI_TEXT = 45  # derived: ~34-token system template + ~10-token CI prompt per text prefill
STEPS = 50


def _cfg(ctx: Context, tp: int = 1, gpu: str = "H100-SXM") -> ExecutorConfig:
    return ExecutorConfig(ctx.gpu(gpu), tp)


def _qwen_image(ctx: Context) -> list[Point]:
    def step(tp: int) -> Predictor:
        return lambda ms: 1e3 * ms.cost("qwen-image").dit_step_time("dit", _cfg(ctx, tp), 1, QI_TOKENS)

    def text(ms: Models) -> float:  # prompt and negative prompt: two prefills
        return 1e3 * ms.cost("qwen-image").prefill_time("text_encoder", _cfg(ctx), 2 * QI_TEXT, requests=2)

    def vae(ms: Models) -> float:
        return 1e3 * ms.cost("qwen-image").vae_time("vae", _cfg(ctx), 1, IMG)

    def e2e(tp: int) -> Predictor:
        return lambda ms: text(ms) + STEPS * step(tp)(ms) + vae(ms)

    def vram(ms: Models) -> float:
        return ms.cost("qwen-image").footprint(["dit", "vae"], _cfg(ctx)).needed_bytes / 1e9

    offload = (Flag.CONFIG_DIFFERS,)
    why = "sglang offloads the text encoder to host memory by default; the model keeps weights on the GPU"
    h100 = "H100-SXM"
    return [
        Point("sglang/qwen-image/denoise-step/1gpu", "sglang",
              "Qwen-Image 1024x1024 denoise step (CFG: 2 forwards), median", h100, 249.0, "ms",
              Role.HELD_OUT, step(1), SGLANG, note="first step 196 ms; median used"),
        Point("sglang/qwen-image/denoise-step/2gpu", "sglang",
              "Qwen-Image 1024x1024 denoise step on 2 GPUs (sequence parallel), median", h100, 190.0,
              "ms", Role.HELD_OUT, step(2), SGLANG),
        Point("sglang/qwen-image/denoise-stage/1gpu", "sglang", "Qwen-Image 50-step denoising stage",
              h100, 12402.0, "ms", Role.HELD_OUT, lambda ms: STEPS * step(1)(ms), SGLANG),
        Point("sglang/qwen-image/text-encoding/1gpu", "sglang",
              "Qwen-Image text encoding (prompt + negative prompt)", h100, 232.0, "ms", Role.HELD_OUT,
              text, SGLANG, offload, why),
        Point("sglang/qwen-image/text-encoding/2gpu", "sglang",
              "Qwen-Image text encoding in the 2-GPU run (encoder on one GPU)", h100, 458.0, "ms",
              Role.HELD_OUT, text, SGLANG, offload, why),
        Point("sglang/qwen-image/vae-decode/1gpu", "sglang", "Qwen-Image VAE decode, 1024x1024", h100,
              17.7, "ms", Role.HELD_OUT, vae, SGLANG),
        Point("sglang/qwen-image/e2e/1gpu", "sglang", "Qwen-Image end to end (text + 50 steps + VAE)",
              h100, 12770.0, "ms", Role.HELD_OUT, e2e(1), SGLANG, offload, why),
        Point("sglang/qwen-image/e2e/2gpu", "sglang", "Qwen-Image end to end on 2 GPUs", h100,
              10192.0, "ms", Role.HELD_OUT, e2e(2), SGLANG, offload, why),
        Point("sglang/qwen-image/peak-vram/1gpu", "sglang",
              "Qwen-Image peak memory (DiT + VAE resident; text encoder offloaded)", h100, 46.9, "GB",
              Role.HELD_OUT, vram, SGLANG),
    ]


def _flux(ctx: Context) -> list[Point]:
    def step(ms: Models) -> float:
        return 1e3 * ms.cost("flux.1-dev").dit_step_time("dit", _cfg(ctx), 1, QI_TOKENS + FLUX_TEXT)

    def text(ms: Models) -> float:
        return 1e3 * ms.cost("flux.1-dev").prefill_time("text_encoder", _cfg(ctx), FLUX_TEXT)

    def e2e(ms: Models) -> float:
        vae = 1e3 * ms.cost("flux.1-dev").vae_time("vae", _cfg(ctx), 1, IMG)
        return text(ms) + STEPS * step(ms) + vae

    h100 = "H100-SXM"
    return [
        Point("sglang/flux.1-dev/denoise-step/1gpu", "sglang",
              "FLUX.1-dev 1024x1024 denoise step (4096 image + 512 text tokens), median", h100, 130.0,
              "ms", Role.HELD_OUT, step, SGLANG),
        Point("sglang/flux.1-dev/text-encoding/1gpu", "sglang",
              "FLUX.1-dev text encoding (T5-XXL, 512 tokens)", h100, 21.0, "ms", Role.HELD_OUT, text,
              SGLANG, note="CLIP-L (123M) not modelled"),
        Point("sglang/flux.1-dev/e2e/1gpu", "sglang", "FLUX.1-dev end to end (text + 50 steps + VAE)",
              h100, 6693.0, "ms", Role.HELD_OUT, e2e, SGLANG),
    ]


def _bagel(ctx: Context) -> list[Point]:
    def image(ms: Models) -> float:
        cost = ms.cost("bagel")
        cfg = _cfg(ctx)
        return (cost.prefill_time("llm", cfg, 60) + STEPS * cost.dit_step_time("gen", cfg, 1, QI_TOKENS)
                + cost.vae_time("vae", cfg, 1, IMG))

    return [Point("bagel-issue/t2i-1024/h800", "bagel-issue",
                  "BAGEL one 1024x1024 image, 50 steps, one H800 ('about 5 s')", "H100-SXM", 5.0, "s",
                  Role.HELD_OUT, image, BAGEL_ISSUE, (Flag.GPU_ASSUMED,),
                  "H800 = H100 SXM silicon (same SMs and HBM3 bandwidth, reduced NVLink); step count "
                  "and CFG interval not stated in the issue (50 steps, CFG on every step assumed)")]


def published_points(ctx: Context) -> tuple[list[Point], list[NotExpressible]]:
    points = [*_qwen_image(ctx), *_flux(ctx), *_bagel(ctx)]
    missing = [
        NotExpressible("vllm-omni-blog", "Qwen3-Omni throughput 2.2 -> 11.7 req/s, audio TTFP "
                       "5,884 -> 631 ms, RTF 1.15 -> 0.47 at concurrency 64", 3,
                       "system metrics under load on an unnamed 3-GPU deployment: a simulator "
                       "question, not a per-iteration cost"),
        NotExpressible("qwen3-omni-report", "first-packet latency and its parts at concurrency 1/4/6 "
                       "(tail-packet preprocessing, thinker TTFT, talker TTFT; 3 x 3 values)", 9,
                       "prompt sizes and the preprocessing of the runs are not published"),
    ]
    return points, missing
