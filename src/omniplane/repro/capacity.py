"""Per-component capacity: requests/s one executor sustains, in Cornfigurator's Table 2 columns.

``capacity(model, gpu)`` answers Table 2 for any catalog model and GPU kind: for each column
the components one executor runs, its TP degree and max batch (the executor defaults of Table
2's footnote, :data:`CONDITIONS`), and the requests/s it sustains at saturation. Columns:

=============  ==========================================================================
image_input    the encoder of images: one request's images (ServeGen: 1.59 per request)
video_input    the encoder of videos: one clip (32 frames, assumption on the resolution)
audio_input    the encoder of audio: one clip (10 s, assumption)
llm            the first LLM (thinker / LLM / text encoder): one request's prompt and reply
audio_output   the components after that LLM that make speech (talker + vocoder), merged
image_output   the image generator after it (DiT + VAE), merged
=============  ==========================================================================

Saturation, per kind (all closed form, on the cost model's iteration times):

* LLM (continuous batching, vLLM v1): the steady state runs ``d`` decoding sequences and ``c``
  prefill tokens per iteration with ``c / d = P / O`` (prompt over reply tokens, so prompts
  enter as fast as replies leave); the largest iteration the executor allows is taken:
  ``d = min(max_batch, budget x O / (P + O), KV tokens / (P + O / 2))``. Throughput is
  ``d / (O x t(c, d))``. A prefill-only LLM (a text encoder) fills the token budget with prompts.
  A talker without chunked prefill prefills whole prompts (budget = prompt x batch).
* encoder: ``max_batch`` requests' items in one forward, the runtime's host preprocessing of
  them overlapping it; throughput = batch / the slower of the two.
* merged components (talker + vocoder, DiT + VAE) run back to back: their per-request
  executor-seconds add.

Request sizes come from ``repro/data/table2_conditions.json`` (ServeGen request-weighted means
and stated assumptions) converted to each model's tokens by its encoders' size facts, or, with
``workload=``, from a catalog workload's request types (their mean resolved work, mix-weighted).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from omniplane.perf.costmodel import CostModel
from omniplane.perf.types import ExecutorConfig
from omniplane.spec import ComponentKind, GeneratorKind, GPUKind, ModelSpec
from omniplane.spec.component import Component, Modality

COLUMNS = ("image_input", "video_input", "audio_input", "llm", "audio_output", "image_output")
BIG_LLM_PARAMS = 30e9  # Table 2 footnote: "LLMs larger than 30B ... tensor parallel degree 2"


@cache
def conditions() -> dict[str, Any]:
    """Table 2's request sizes and executor defaults (``repro/data/table2_conditions.json``)."""
    path = Path(str(files("omniplane.repro") / "data" / "table2_conditions.json"))
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@dataclass(frozen=True)
class Column:
    """One Table 2 cell: what runs, how, and the requests/s it sustains."""

    name: str
    requests_per_s: float
    components: tuple[str, ...]
    tp: int
    max_batch: int
    source: str
    detail: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"requests_per_s": round(self.requests_per_s, 4), "components": list(self.components),
                "tp": self.tp, "max_batch": self.max_batch, "source": self.source,
                "detail": {k: round(v, 4) for k, v in self.detail.items()}}


def vllm_defaults(gpu: GPUKind) -> tuple[int, int]:
    """vLLM's online-serving defaults ``(max_num_seqs, max_num_batched_tokens)`` on ``gpu``:
    1024 / 8192 on GPUs with at least 70 GB that are not A100s, else 256 / 2048."""
    big = gpu.memory_gb >= 70 and not any("a100" in n.lower() for n in (gpu.name, *gpu.aliases))
    return (1024, 8192) if big else (256, 2048)


# ---- request sizes -------------------------------------------------------------------------
@dataclass(frozen=True)
class Sizes:
    """Mean work of one Table 2 request, per component (the canonical quantities of
    :mod:`omniplane.spec.work`), plus the LLM's and the column's own inputs."""

    encoder: Mapping[str, tuple[float, float]]  # component -> (items, tokens) per column request
    llm_prompt: float
    llm_output: float
    talker_output: float  # frames
    images: tuple[tuple[float, float], ...]  # (pixels, weight) of image-output requests
    steps: float
    source: str
    speech_s: float = 0.0  # seconds of speech a spoken reply voices


def tiles_for(pixels: float, aspect: float, tile: float, max_tiles: int) -> int:
    """Tiles InternVL's dynamic preprocessing cuts an image into: the grid ``i x j`` (at most
    ``max_tiles`` tiles) whose aspect ratio is closest to the image's, the larger of equally
    close grids when the image covers more than half of it, plus a thumbnail tile when the
    grid has more than one (InternVL ``dynamic_preprocess`` / ``find_closest_aspect_ratio``)."""
    grids = sorted({(i, j) for n in range(1, max_tiles + 1) for i in range(1, n + 1)
                    for j in range(1, n + 1) if i * j <= max_tiles}, key=lambda g: g[0] * g[1])
    best, diff = (1, 1), math.inf
    for i, j in grids:
        d = abs(aspect - i / j)
        if d < diff - 1e-12:
            best, diff = (i, j), d
        elif abs(d - diff) <= 1e-12 and pixels > 0.5 * tile * i * j:
            best = (i, j)
    n = best[0] * best[1]
    return n + (1 if n > 1 else 0)


def resized_frame(comp: Component, width: float, height: float, frames: int) -> float:
    """Pixels of one video frame after the serving stack's processor resizes it (Qwen's
    ``smart_resize``): sides rounded to the token's side (patch x merge), the area scaled into
    ``[frame_min_pixels, frame_max_pixels]`` and, when ``video_max_pixels`` bounds all frames
    together (Qwen3-VL), into that budget over ``frames``. Without bounds the rounded frame."""
    s = comp.size
    f = (s.patch_pixels or 14) * math.sqrt(s.patches_per_token or 1.0)
    hi = float(s.frame_max_pixels or math.inf)
    if s.video_max_pixels:
        hi = min(hi, s.video_max_pixels / max(frames, 1))
    lo = float(s.frame_min_pixels or 0)
    h, w = max(f, round(height / f) * f), max(f, round(width / f) * f)
    if h * w > hi:
        beta = math.sqrt(height * width / hi)
        h, w = max(f, math.floor(height / beta / f) * f), max(f, math.floor(width / beta / f) * f)
    elif h * w < lo:
        beta = math.sqrt(lo / (height * width))
        h, w = math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
    return float(h * w)


def _vision_tokens(comp: Component, pixels: float, frames: float = 1.0,
                   width: float = 0.0, height: float = 0.0) -> float:
    """LLM tokens a vision encoder makes of ``frames`` frames of ``pixels`` each: patches of
    ``patch_pixels`` spanning ``frames_per_patch`` frames, ``patches_per_token`` merged into one
    token; a video's frames resized first (:func:`resized_frame`, given ``width x height``); a
    tiled encoder (``tile_pixels``) cuts an image into tiles (:func:`tiles_for`, over the
    assumed mix of aspect ratios) and takes one tile per video frame."""
    s = comp.size
    per_token = (s.patches_per_token or 1.0) * (s.patch_pixels or 14) ** 2
    if s.tile_pixels:
        if frames > 1:
            return frames * s.tile_pixels / per_token
        aspects = conditions()["image_aspects"]
        tiles = sum(tiles_for(pixels, a, s.tile_pixels, s.max_tiles or 12) for a in aspects) / len(aspects)
        return tiles * s.tile_pixels / per_token
    if frames <= 1:  # an image fills a temporal patch by itself (repeated in time)
        return pixels / per_token
    if width > 0 and height > 0:
        pixels = resized_frame(comp, width, height, round(frames))
    return frames / (s.frames_per_patch or 1) * pixels / per_token


def _encoder_for(model: ModelSpec, modality: Modality) -> Component | None:
    """The encoder of ``modality``; of several, the one named after it (image_encoder)."""
    found = [c for c in model.components if c.kind is ComponentKind.ENCODER and c.encodes(modality)]
    named = [c for c in found if modality.value in c.name]
    return (named or found)[0] if found else None


def first_llm(model: ModelSpec) -> str | None:
    return next((n for n in model.topo_order if model.component(n).is_llm), None)


def table2_sizes(model: ModelSpec) -> Sizes:
    """Table 2's request, converted to ``model``'s tokens (``repro/data/table2_conditions.json``)."""
    cond = conditions()
    sg = cond["servegen"]
    px = sg["image_tokens"] * cond["image_pixels_per_servegen_token"]
    v = cond["video"]
    enc: dict[str, tuple[float, float]] = {}
    llm_extra = 0.0
    image = _encoder_for(model, Modality.IMAGE)
    video = _encoder_for(model, Modality.VIDEO)
    audio = _encoder_for(model, Modality.AUDIO)
    # the LLM column's request is a ServeGen mm-image request: its text and its images (the
    # trace has no video or audio); the encoder columns take their own inputs
    if image is not None:
        tokens = sg["image_count"] * _vision_tokens(image, px)
        enc[f"image:{image.name}"] = (sg["image_count"], tokens)
        llm_extra += tokens
    if video is not None:
        tokens = _vision_tokens(video, v["width"] * v["height"], v["frames"], v["width"], v["height"])
        enc[f"video:{video.name}"] = (1.0, tokens)
    if audio is not None:
        tokens = cond["audio_seconds"] * (audio.size.tokens_per_second or 25.0)
        enc[f"audio:{audio.name}"] = (1.0, tokens)
    llm = first_llm(model)
    prefill_only = llm is not None and all(
        rt.work.get(llm, {}).get("output_tokens") is None for rt in model.request_types)
    if prefill_only:
        prompt, output = cond["text_encoder_prompt_tokens"], 0.0
    else:
        prompt, output = sg["text_tokens"] + llm_extra, sg["output_tokens"]
    speech = output / cond["speech_text_tokens_per_s"]
    talker = _talker(model)
    frames = speech * (model.component(talker).size.frame_rate_hz or 12.5) if talker else 0.0
    io = cond["image_output"]
    images = tuple((w * h, 1.0 / len(io["sizes"])) for w, h in io["sizes"])
    return Sizes(enc, prompt, output, frames, images, float(io["steps"]),
                 "Table 2 conditions (repro/data/table2_conditions.json): ServeGen request-weighted "
                 "means; video, audio and speech lengths are stated assumptions", speech)


def _talker(model: ModelSpec) -> str | None:
    llm = first_llm(model)
    return next((n for n in model.topo_order if n != llm and model.component(n).is_llm), None)


# ---- saturation -----------------------------------------------------------------------------
def llm_throughput(cost: CostModel, comp: str, cfg: ExecutorConfig, prompt: float, output: float,
                   budget: int, chunked: bool = True) -> tuple[float, dict[str, float]]:
    """Requests/s of one LLM executor at saturation (module docstring) and the iteration it
    settles on."""
    kv = cost.kv_capacity_tokens([comp], cfg)
    p = max(prompt, 1.0)
    if output <= 0:  # prefill only: fill the budget (or the batch) with whole prompts
        n = max(1, min(cfg.max_batch, math.floor(budget / p) if chunked else cfg.max_batch))
        c = n * p if not chunked else min(budget, n * p)
        t = cost.llm_iteration_time(comp, cfg, prefill_tokens=int(c), prefill_requests=n)
        return c / p / t, {"prefill_tokens": c, "decode_batch": 0.0, "iteration_ms": 1e3 * t}
    d = min(float(cfg.max_batch), kv / (p + output / 2.0))
    if chunked:
        d = min(d, budget * output / (p + output))
    d = max(d, 1e-3)
    c = d * p / output
    requests = max(1, round(c / p)) if not chunked else max(1, math.ceil(c / p))
    t = cost.llm_iteration_time(comp, cfg, prefill_tokens=max(1, round(c)),
                                prefill_context=round(c / requests * 0.5) if chunked else 0,
                                prefill_requests=requests, decode_batch=max(1, round(d)),
                                decode_context=round(max(1, round(d)) * (p + output / 2.0)))
    return d / (output * t), {"prefill_tokens": c, "decode_batch": d, "iteration_ms": 1e3 * t}


def _llm_cfg(cost: CostModel, comp: str, gpu: GPUKind, tp: int | None = None) -> ExecutorConfig:
    seqs, _ = vllm_defaults(gpu)
    params = cost.model.component(comp).size.params
    return ExecutorConfig(gpu, tp or (2 if params > BIG_LLM_PARAMS else 1), seqs)


def capacity(model: ModelSpec, gpu: GPUKind, cost: CostModel | None = None,
             sizes: Sizes | None = None) -> dict[str, Column]:
    """Table 2's columns for ``model`` on ``gpu`` (columns the model lacks are absent)."""
    cost = cost or CostModel(model)
    sz = sizes or table2_sizes(model)
    seqs, budget = vllm_defaults(gpu)
    rt = cost.runtime.name
    out: dict[str, Column] = {}
    for key, (items, tokens) in sz.encoder.items():
        col, name = key.split(":")
        et = model.single_executor_type(name)
        b = max(et.max_batch) if et is not None else 32
        cfg = ExecutorConfig(gpu, 1, b)
        # host preprocessing overlaps the GPU: the slower of the two bounds the executor
        frames = (model.component(name).size.frames_per_patch or 1) if col == "video" else 1
        t = max(cost.encoder_time(name, cfg, max(1, round(b * items)), b * tokens),
                cost.encoder_host_time(name, max(1, round(b * items)), b * tokens, frames))
        out[f"{col}_input"] = Column(f"{col}_input", b / t, (name,), 1, b,
                                     f"{cost.source_of(name, cfg, 'encoder')} ({rt} runtime): "
                                     f"{b} requests of {items:.2f} items, {tokens:.0f} tokens each; "
                                     f"{sz.source}",
                                     {"items": items, "tokens": tokens, "batch_ms": 1e3 * t})
    llm = first_llm(model)
    if llm is not None:
        cfg = _llm_cfg(cost, llm, gpu)
        x, it = llm_throughput(cost, llm, cfg, sz.llm_prompt, sz.llm_output, budget)
        out["llm"] = Column("llm", x, (llm,), cfg.tp, cfg.max_batch,
                            f"{cost.source_of(llm, cfg, 'decode')} ({rt} runtime): continuous batching "
                            f"at saturation, {sz.llm_prompt:.0f} prompt + {sz.llm_output:.0f} reply tokens; "
                            f"{sz.source}",
                            {"prompt_tokens": sz.llm_prompt, "output_tokens": sz.llm_output, **it})
    downstream = [n for n in model.topo_order if llm is not None and n != llm
                  and model.topo_order.index(n) > model.topo_order.index(llm)]
    speech = [n for n in downstream if model.component(n).is_llm
              or model.component(n).generator is GeneratorKind.VOCODER]
    if speech and any(model.component(n).generator is GeneratorKind.VOCODER for n in speech):
        out["audio_output"] = _audio_output(cost, model, gpu, speech, sz, seqs)
    image = [n for n in downstream if model.component(n).generator in (GeneratorKind.DIT, GeneratorKind.VAE)]
    if image:
        out["image_output"] = _image_output(cost, model, gpu, image, sz)
    return out


def _audio_output(cost: CostModel, model: ModelSpec, gpu: GPUKind, comps: list[str], sz: Sizes,
                  seqs: int) -> Column:
    per_request, detail = 0.0, {}
    seconds = 0.0
    for name in comps:
        c = model.component(name)
        if c.is_llm:
            cfg = ExecutorConfig(gpu, 1, seqs)
            prompt = sz.llm_prompt + sz.llm_output  # the talker prefills the thinker's context
            x, it = llm_throughput(cost, name, cfg, prompt, sz.talker_output, 0, chunked=False)
            per_request += 1.0 / x
            seconds = sz.talker_output / (c.size.frame_rate_hz or 12.5)
            detail.update({f"{name}_frames": sz.talker_output, f"{name}_s_per_request": 1.0 / x,
                           f"{name}_iteration_ms": it["iteration_ms"], f"{name}_batch": it["decode_batch"]})
        else:
            cfg = ExecutorConfig(gpu, 1, 1)
            audio = seconds or sz.speech_s  # without a talker the LLM itself made the codes
            t = cost.vocoder_time(name, cfg, 1, audio)
            per_request += t
            detail[f"{name}_s_per_request"] = t
    batch = seqs
    return Column("audio_output", 1.0 / per_request, tuple(comps), 1, batch,
                  f"roofline ({cost.runtime.name} runtime): merged executor, components back to back; "
                  f"{sz.talker_output:.0f} frames of speech per request; {sz.source}", detail)


def _image_output(cost: CostModel, model: ModelSpec, gpu: GPUKind, comps: list[str], sz: Sizes) -> Column:
    cfg = ExecutorConfig(gpu, 1, 1)
    per_request = 0.0
    for pixels, weight in sz.images:
        t = 0.0
        for name in comps:
            c = model.component(name)
            if c.generator is GeneratorKind.DIT:
                tokens = pixels / (c.size.pixels_per_token or 256.0)
                t += sz.steps * cost.dit_step_time(name, cfg, 1, tokens)
            else:
                t += cost.vae_time(name, cfg, 1, pixels)
        per_request += weight * t
    return Column("image_output", 1.0 / per_request, tuple(comps), 1, 1,
                  f"roofline ({cost.runtime.name} runtime): {sz.steps:.0f} steps at batch 1, "
                  f"{'/'.join(f'{math.isqrt(int(p))}px' for p, _ in sz.images)} (mix-weighted); {sz.source}",
                  {"s_per_request": per_request, "guidance_passes": max(
                      (cost.guidance_passes(n) for n in comps
                       if model.component(n).generator is GeneratorKind.DIT), default=1.0)})


def workload_sizes(model: ModelSpec, mix: Mapping[str, float], n: int = 400, seed: int = 0) -> Sizes:
    """Mean work of a catalog workload's request types (``mix``: type -> fraction), per column:
    an encoder column over the types that use it, the LLM over all, the talker over the types
    that speak, the image generator over the types that draw."""
    from omniplane.spec.work import mean_work

    work = {t: mean_work(model, t, n, seed) for t, f in mix.items() if f > 0}
    weight = {t: mix[t] for t in work}

    def avg(comp: str, q: str) -> float:
        ts = [t for t in work if comp in work[t] and q in work[t][comp]]
        total = sum(weight[t] for t in ts)
        return sum(weight[t] * work[t][comp][q] for t in ts) / total if total else 0.0

    enc: dict[str, tuple[float, float]] = {}
    for m in (Modality.IMAGE, Modality.VIDEO, Modality.AUDIO):
        c = _encoder_for(model, m)
        if c is None:
            continue
        types = [t for t in work if c.name in work[t] and m in model.request_type(t).inputs]
        total = sum(weight[t] for t in types)
        if total:
            enc[f"{m.value}:{c.name}"] = (sum(weight[t] * work[t][c.name]["items"] for t in types) / total,
                                          sum(weight[t] * work[t][c.name]["tokens"] for t in types) / total)
    llm = first_llm(model)
    talker = _talker(model)
    dit = next((n for n in model.topo_order if model.component(n).generator is GeneratorKind.DIT), None)
    images: tuple[tuple[float, float], ...] = ()
    steps = 0.0
    if dit is not None:
        ts = [t for t in work if dit in work[t]]
        total = sum(weight[t] for t in ts)
        images = tuple((work[t][dit]["pixels"], weight[t] / total) for t in ts)
        steps = avg(dit, "steps")
    vocoder = next((n for n in model.topo_order
                    if model.component(n).generator is GeneratorKind.VOCODER), None)
    return Sizes(enc, avg(llm, "prompt_tokens") if llm else 0.0, avg(llm, "output_tokens") if llm else 0.0,
                 avg(talker, "output_tokens") if talker else 0.0, images, steps,
                 "the workload's request types (mean resolved work, mix-weighted)",
                 avg(vocoder, "audio_seconds") if vocoder else 0.0)
