"""Fit a serving runtime's host-side factors to the points measured on it (``perf fit``).

Bounded least squares on log(predicted / measured) over every point of the runtime, the GPU
kinds' efficiency factors held as they are (they are fitted to Splitwise first). The factors,
bounds and starting values are below, per runtime; each bound says what is physically
plausible, so a factor that hits its bound is visible in the fitted file.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from omniplane.perf.factors import Calibration
from omniplane.perf.runtime import Runtime
from omniplane.repro.validation.points import Context, Point, Role


@dataclass(frozen=True)
class Free:
    """One fitted factor: its bounds (seconds) and start, and why the bounds."""

    name: str
    low: float
    high: float
    start: float


# Per runtime: the factors fitted and the ones held (with their sources).
FREE: dict[str, tuple[Free, ...]] = {
    "vllm": (
        Free("step_s", 0.0, 0.03, 5e-3),
        Free("mtp_pass_s", 0.0, 5e-3, 8e-4),
        Free("vocoder_call_s", 0.0, 0.05, 3e-3),
    ),
    "cornserve": (
        Free("layer_s", 0.0, 1e-3, 2e-4),
        Free("prompt_token_s", 0.0, 1e-3, 1e-4),
        Free("request_s", 0.0, 0.5, 0.03),
        Free("mtp_pass_s", 0.0, 5e-3, 5e-4),
        Free("vocoder_call_s", 0.0, 0.5, 0.01),
        Free("encoder_s_per_mpx", 0.0, 1.0, 0.05),
        Free("encoder_s_per_audio_s", 0.0, 0.1, 0.005),
        Free("encoder_s_per_output_mb", 0.0, 0.05, 1e-3),
    ),
}

# The runtimes' structural facts (not fitted), with their sources.
BASE: dict[str, Runtime] = {
    "vllm": Runtime(
        "vllm", "vLLM / vLLM-Omni as the Qwen3-Omni report ran it", layer_s=None,
        mtp_batched=True, vocoder_chunk_frames=1, guidance=True,
        factor_sources={
            "layer_s": "the GPU kind's layer_s (CUDA-graph replay): the report applies torch.compile "
                       "and CUDA Graph to the MTP module and the codec decoder (arXiv:2509.17765)",
            "mtp_batched": "arXiv:2509.17765 Table 2: MTP 14 -> 16 -> 18 ms per token at concurrency "
                           "1 -> 4 -> 6, i.e. one batched pass per codebook, not one per stream",
            "vocoder_chunk_frames": "arXiv:2509.17765 Table 2 reports the codec decoder per code "
                                    "(streaming, one code per call)",
            "guidance": "the model's defaults (GUIDANCE_PASSES)",
        }),
    "cornserve": Runtime(
        "cornserve", "Cornserve, as Cornfigurator's Table 2 was measured on it",
        mtp_batched=False, vocoder_chunk_frames=300, guidance=False,
        factor_sources={
            "mtp_batched": "assumption inferred from Table 2: with one batched pass per codebook, "
                           "the talker at vLLM's default 256 sequences sustains ~7x Table 2's "
                           "Qwen3-Omni audio_output of 0.12 req/s on the fitted factors; passes one "
                           "sequence at a time reproduce it. Cornserve's talker executor runs vLLM "
                           "with --enforce-eager (cornserve-ai/cornserve tasklib/cornserve_tasklib/"
                           "task_executors/descriptor/omni.py)",
            "vocoder_chunk_frames": "Cornserve's Qwen3-Omni code2wav streams chunks of 300 codes "
                                    "(geri/models/qwen3_omni_moe.py, chunk_size default 300)",
            "guidance": "Cornserve's Qwen-Image generator calls diffusers' QwenImagePipeline with "
                        "prompt embeddings and no negative prompt, so no true CFG "
                        "(geri/models/qwen_image.py)",
        }),
}

WHY: dict[str, str] = {
    "layer_s": "host and launch time per transformer layer per forward",
    "step_s": "fixed host time per LLM iteration (scheduling, sampling, output)",
    "prompt_token_s": "host time per prefilled token",
    "request_s": "host time per request prefilled in an iteration",
    "mtp_pass_s": "fixed time per MTP pass (sampling, embedding of one codebook)",
    "vocoder_call_s": "fixed time per vocoder call",
    "encoder_s_per_mpx": "encoder host preprocessing per megapixel",
    "encoder_s_per_audio_s": "encoder host preprocessing per second of audio",
    "encoder_s_per_output_mb": "encoder output embeddings handed to the LLM, per MB",
}


def fit_runtime(ctx: Context, points: Sequence[Point], calibration: Calibration,
                base: Runtime, free: Sequence[Free] | None = None) -> Runtime:
    """``base`` with its free factors fitted to the runtime points that ran on it."""
    pts = [p for p in points if p.role is Role.RUNTIME and p.runtime == base.name and not p.excluded]
    if not pts:
        raise ValueError(f"no runtime-fit points for runtime {base.name!r}")
    free = tuple(free if free is not None else FREE.get(base.name, ()))
    measured = np.array([p.measured for p in pts])

    def trial(x: np.ndarray) -> Runtime:
        return base.with_factors(**{f.name: float(v) for f, v in zip(free, x, strict=True)})

    def residuals(x: np.ndarray) -> np.ndarray:
        models = ctx.models(calibration.with_runtime(trial(x)))
        pred = np.array([p.predict(models) for p in pts])
        return np.asarray(np.log(np.maximum(pred, 1e-12) / measured))

    x0 = np.array([f.start for f in free])
    res = least_squares(residuals, x0, bounds=(np.array([f.low for f in free]),
                                               np.array([f.high for f in free])),
                        x_scale=np.maximum(x0, 1e-6), diff_step=1e-3, method="trf")
    err = statistics.median(float(abs(np.exp(r) - 1.0)) for r in res.fun)
    datasets = "/".join(sorted({p.dataset for p in pts}))
    sources = dict(base.factor_sources)
    for f, v in zip(free, res.x, strict=True):
        hit = " (at its bound)" if np.isclose(v, f.low) or np.isclose(v, f.high) else ""
        sources[f.name] = (f"fitted: {WHY.get(f.name, f.name)}; {len(pts)} {datasets} points, bounds "
                           f"[{f.low:g}, {f.high:g}] s{hit}")
    return trial(res.x).with_factors(
        source=(f"fitted: {len(free)} factors to {len(pts)} {datasets} points (bounded least squares "
                f"on log(predicted/measured), in-sample median error {err:.1%})"),
        factor_sources=sources, fitted_to=tuple(p.id for p in pts))
