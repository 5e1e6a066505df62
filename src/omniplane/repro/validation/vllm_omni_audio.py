"""vLLM-Omni's CI runs with audio output beside the ``vllm-v1`` runtime's talker and code2wav.

Each run (``audio_benchmarks`` in ``repro/data/vllm_omni_ci.json``) is replayed one request at
a time on vLLM-Omni's stock layout (thinker on GPU 0; talker and code2wav on GPU 1):

``serial``       (``--no-async-chunk``) the thinker decodes the whole text, then the talker the
                 whole codec sequence, then code2wav voices it:
                 E2EL = thinker E2EL + talker E2EL + code2wav time
``async_chunk``  the talker starts on the thinker's first chunk and code2wav voices chunks as the
                 talker emits them; talker and code2wav share GPU 1, so their work adds:
                 E2EL = max(thinker E2EL, thinker TTFT + talker E2EL + code2wav time)

Each stage is the closed-loop client (:func:`omniplane.perf.replay.closed_loop`) at concurrency 1
(the talker's output is the run's codec frames: audio seconds x 12.5 Hz, audio seconds =
E2EL / RTF). The talker's factor is fitted to the points of split ``fit`` only.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from omniplane.perf.costmodel import CostModel
from omniplane.perf.factors import Calibration
from omniplane.perf.replay import closed_loop
from omniplane.perf.runtime import Runtime
from omniplane.perf.types import ExecutorConfig
from omniplane.repro.validation.points import Context
from omniplane.repro.validation.vllm_omni_ci import MAX_BATCH, MODEL, RUNTIME, ci_data

SPLITS = ("fit", "check", "bound", "late")
MODES = ("serial", "async_chunk", "pipeline")


@dataclass(frozen=True)
class AudioPoint:
    """One audio-output run's mean E2EL at one load."""

    id: str
    benchmark: str
    mode: str
    split: str
    load: str
    e2el_ms: float
    rtf: float
    input_len: int
    output_len: int
    source: str
    concurrency: int = 1
    num_prompts: int = 1

    @property
    def audio_s(self) -> float:
        return self.e2el_ms / 1e3 / self.rtf


def audio_points() -> list[AudioPoint]:
    data = ci_data()
    out = []
    for i, b in enumerate(data.get("audio_benchmarks", [])):
        where = f"repro/data/vllm_omni_ci.json: audio_benchmarks[{i}]"
        for key in ("id", "file", "commit", "mode", "split", "load", "mean_e2el_ms", "mean_audio_rtf",
                    "random_input_len", "random_output_len"):
            if key not in b:
                raise ValueError(f"{where}: missing {key!r}")
        if b["mode"] not in MODES or b["split"] not in SPLITS:
            raise ValueError(f"{where}: mode must be one of {MODES} and split one of {SPLITS}, "
                             f"got {b['mode']!r} / {b['split']!r}")
        if not float(b["mean_audio_rtf"]) > 0:
            raise ValueError(f"{where}.mean_audio_rtf: expected a number > 0")
        out.append(AudioPoint(f"vllm-omni-ci/{b['id']}/e2el/{b['load']}", b["id"], b["mode"], b["split"],
                              b["load"], float(b["mean_e2el_ms"]), float(b["mean_audio_rtf"]),
                              int(b["random_input_len"]), int(b["random_output_len"]),
                              f"vllm-project/vllm-omni {b['commit']} {b['file']}",
                              int(b.get("concurrency", 1)), int(b.get("num_prompts", 1))))
    return out


def predict_e2el_ms(ctx: Context, calibration: Calibration, p: AudioPoint, runtime: str = RUNTIME) -> float:
    """The run's E2EL (ms) replayed one request at a time on the stock layout (module doc)."""
    gpu = ctx.gpu(ci_data()["gpu"])
    spec = ctx.spec(MODEL)
    cost = CostModel(spec, calibration=calibration, runtime=runtime)
    cfg = ExecutorConfig(gpu, 1, MAX_BATCH)
    frames = max(1, round(p.audio_s * float(spec.component("code2wav").size.frame_rate_hz or 12.5)))
    if p.mode == "pipeline":  # --no-async-chunk at concurrency c: the two-GPU closed loop
        from omniplane.repro.validation.vllm_omni_pipeline import no_async_chunk_loop

        return 1e3 * no_async_chunk_loop(cost, cfg, input_len=p.input_len, output_len=p.output_len,
                                         frames=frames, audio_s=p.audio_s, concurrency=p.concurrency,
                                         num_prompts=p.num_prompts).e2el_s
    think = closed_loop(cost, "thinker", cfg, input_len=p.input_len, output_len=p.output_len,
                        concurrency=1, num_prompts=1)
    talk = closed_loop(cost, "talker", cfg, input_len=p.input_len, output_len=frames,
                       concurrency=1, num_prompts=1)
    voice = cost.vocoder_time("code2wav", cfg, 1, p.audio_s)
    if p.mode == "serial":
        return 1e3 * (think.e2el_s + talk.e2el_s + voice)
    return 1e3 * max(think.e2el_s, think.ttft_s + talk.e2el_s + voice)


def audio_section(ctx: Context, calibration: Calibration, runtime: str = RUNTIME) -> dict[str, Any]:
    rows = []
    for p in audio_points():
        pred = predict_e2el_ms(ctx, calibration, p, runtime)
        err = None if p.split == "bound" else round(pred / p.e2el_ms - 1.0, 4)
        rows.append({"id": p.id, "benchmark": p.benchmark, "mode": p.mode, "split": p.split, "load": p.load,
                     "audio_s": round(p.audio_s, 1), "published_ms": p.e2el_ms,
                     "predicted_ms": round(pred, 1),
                     "within_bound": pred <= p.e2el_ms if p.split == "bound" else None,
                     "rel_error": err, "source": p.source})

    def stats(rs: list[dict[str, Any]]) -> dict[str, Any]:
        errs = sorted(abs(r["rel_error"]) for r in rs)
        return ({"n": len(errs), "median_abs_err": round(statistics.median(errs), 4),
                 "max_abs_err": round(errs[-1], 4)} if errs else {"n": 0})

    bounds = [r for r in rows if r["split"] == "bound"]
    return {"runtime": runtime, "split": ci_data().get("audio_split_note", ""), "rows": rows,
            "late": stats([r for r in rows if r["split"] == "late"]),
            "fit": stats([r for r in rows if r["split"] == "fit"]),
            "check_points": stats([r for r in rows if r["split"] == "check"]),
            "bounds": {"n": len(bounds), "respected": sum(bool(r["within_bound"]) for r in bounds)}}


# ---- the talker's fit ----------------------------------------------------------------------------
# The stock layout's code2wav chunk: vllm_omni/deploy/qwen3_omni_moe.yaml (vLLM-Omni 0.30),
# connectors.connector_of_shared_memory.extra.codec_chunk_frames
CODEC_CHUNK_FRAMES = 25
# Free factors: (name, low, high, start, why)
FREE_TALKER = (
    ("mtp_pass_s", 0.0, 2e-3, 4e-4, "fixed time per code-predictor (MTP) pass in vLLM-Omni's talker, s"),
    ("mtp_seq_pass_s", 0.0, 2e-3, 1e-4, "host time per code-predictor pass per sequence emitting a "
                                        "frame, overlapped with the GPU's step (the step takes the "
                                        "larger), s"),
)


def fit_talker(ctx: Context, calibration: Calibration, base: Runtime) -> Runtime:
    """``base`` (the fitted thinker side of ``vllm-v1``) with the talker's two free factors
    (``FREE_TALKER``) fitted by bounded least squares on log(predicted / measured) E2EL over the
    audio points of split ``fit``, and the code2wav chunk set from the stock config (not fitted)."""
    import numpy as np
    from scipy.optimize import least_squares

    rt0 = base.with_factors(vocoder_chunk_frames=CODEC_CHUNK_FRAMES)
    pts = [p for p in audio_points() if p.split == "fit"]
    if not pts:
        raise ValueError("repro/data/vllm_omni_ci.json: audio_benchmarks has no point of split 'fit'")

    def trial(x: Any) -> Runtime:
        return rt0.with_factors(**{f[0]: float(v) for f, v in zip(FREE_TALKER, x, strict=True)})

    def residuals(x: Any) -> Any:
        cal = calibration.with_runtime(trial(x))
        return np.array([np.log(predict_e2el_ms(ctx, cal, p) / p.e2el_ms) for p in pts])

    res = least_squares(residuals, np.array([f[3] for f in FREE_TALKER]),
                        bounds=(np.array([f[1] for f in FREE_TALKER]), np.array([f[2] for f in FREE_TALKER])),
                        x_scale=np.array([1e-4, 1e-5]), diff_step=1e-3, method="trf")
    sources = dict(rt0.factor_sources)
    for f, v in zip(FREE_TALKER, res.x, strict=True):
        hit = " (at its bound)" if np.isclose(v, f[1]) or np.isclose(v, f[2]) else ""
        sources[f[0]] = (f"fitted: {f[4]}; {len(pts)} vLLM-Omni CI audio-output E2EL points (split fit of "
                         f"audio_benchmarks in repro/data/vllm_omni_ci.json),"
                         f" bounds [{f[1]:g}, {f[2]:g}]{hit}")
    sources["vocoder_chunk_frames"] = ("vLLM-Omni's stock Qwen3-Omni config: codec_chunk_frames 25 "
                                       "(vllm_omni/deploy/qwen3_omni_moe.yaml)")
    held = calibration.runtime("vllm").source_of("vocoder_call_s")
    sources["vocoder_call_s"] = f"held: the vllm runtime's ({held})"
    fitted = [p.id for p in pts]
    return trial(res.x).with_factors(factor_sources=sources,
                                     fitted_to=tuple(i for i in base.fitted_to if i not in fitted)
                                     + tuple(fitted))
