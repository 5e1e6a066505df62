"""Vidur's operator profiles of Llama-2-7B (data/vidur-profiles/*-Llama-2-7b-hf-mlp.csv, MIT).

A point is the summed median kernel time of one layer's four linear operators (QKV projection,
attention output projection, fused gate/up projection, down projection) for ``num_tokens``
tokens on ``num_tensor_parallel_workers`` GPUs. The model's answer is the roofline time of the
same four matrix multiplications: kernel times, so no communication, and of the per-layer fixed
time only the share of these 4 of a layer's ~15 kernels (``KERNELS_PER_LAYER``).
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict

from omniplane.perf.roofline import KERNELS_PER_LAYER
from omniplane.perf.shapes import ACT_BYTES
from omniplane.perf.types import ExecutorConfig, Work
from omniplane.repro.validation.points import Context, Models, Point, Predictor, Role, data_dir

SOURCE = "data/vidur-profiles/{}-Llama-2-7b-hf-mlp.csv (github.com/microsoft/vidur, MIT)"
GPUS = {"a100": "A100-80GB", "h100": "H100-SXM"}
OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
TOKENS = (1, 64, 256, 1024, 4096)
TPS = (1, 2, 4, 8)


def _matrices(ctx: Context) -> list[tuple[int, int]]:
    """(in, out) of the four linear operators of one Llama-2-7B layer, from the spec."""
    s = ctx.spec("llama-2-7b").component("llm").size
    h, i = s.hidden or 0, s.intermediate or 0
    hd = s.attn_head_dim or 0
    qkv = (s.heads or 0) * hd + 2 * (s.kv_heads or 0) * hd
    return [(h, qkv), ((s.heads or 0) * hd, h), (h, 2 * i), (i, h)]


def _predict(ctx: Context, gpu: str, tp: int, tokens: int) -> Predictor:
    cfg = ExecutorConfig(ctx.gpu(gpu), tp)
    mats = _matrices(ctx)
    bpp = ctx.spec("llama-2-7b").component("llm").size.bytes_per_param

    def predict(ms: Models) -> float:
        cost = ms.cost("llama-2-7b")
        fixed = cost.efficiency(cfg).layer_s / KERNELS_PER_LAYER
        total = 0.0
        for k, n in mats:
            flops = 2.0 * tokens * k * n / tp
            bytes_ = (k * n * bpp + tokens * (k + n) * ACT_BYTES) / tp
            total += cost.time_of(Work(flops, bytes_, fixed, 0.0), cfg)
        return 1e3 * total

    return predict


def vidur_points(ctx: Context) -> list[Point]:
    points: list[Point] = []
    for short, gpu in GPUS.items():
        rows: dict[tuple[int, int], list[float]] = defaultdict(list)
        path = data_dir() / f"vidur-profiles/{short}-Llama-2-7b-hf-mlp.csv"
        with path.open() as fh:
            for r in csv.DictReader(fh):
                key = (int(r["num_tokens"]), int(r["num_tensor_parallel_workers"]))
                rows[key].append(sum(float(r[f"time_stats.{op}.median"]) for op in OPS))
        for tp in TPS:
            for tokens in TOKENS:
                if (tokens, tp) not in rows:
                    continue
                points.append(Point(
                    f"vidur/llama-2-7b/{short}/tp{tp}/n{tokens}", "vidur",
                    f"Llama-2-7B {gpu} TP{tp}: one layer's 4 linear ops, {tokens} tokens", gpu,
                    statistics.median(rows[(tokens, tp)]), "ms", Role.HELD_OUT,
                    _predict(ctx, gpu, tp, tokens), SOURCE.format(short)))
    return points
