"""Memory footprint of an executor: weights of every hosted component plus the KV cache that
fits in what is left. Infeasible configs raise :class:`InfeasibleConfig`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

from omniplane.perf.shapes import Shape
from omniplane.perf.types import ExecutorConfig, InfeasibleConfig, MemoryFootprint
from omniplane.spec import ComponentKind, GeneratorKind


@dataclass(frozen=True)
class MemoryPolicy:
    """How much of a GPU an executor may use.

    utilization      fraction of GPU memory the engine claims (vLLM ``gpu_memory_utilization``
                     default 0.9, https://docs.vllm.ai/en/latest/configuration/engine_args.html)
    reserve_bytes    activations, CUDA graphs and workspace per GPU (assumption: 2 GB, the order
                     of vLLM's profiled activation peak for 8k-token batches on 7-70B models)
    min_kv_tokens    an executor hosting an LLM must hold at least this many KV tokens
                     (assumption: one 1k-token request)
    """

    utilization: float = 0.9
    reserve_bytes: float = 2e9
    min_kv_tokens: int = 1024

    def __post_init__(self) -> None:
        if not 0.0 < self.utilization <= 1.0:
            raise ValueError(f"MemoryPolicy.utilization must be in (0, 1], got {self.utilization}")
        if self.reserve_bytes < 0 or self.min_kv_tokens < 0:
            raise ValueError("MemoryPolicy.reserve_bytes and min_kv_tokens must be >= 0")


def weights_per_gpu(shape: Shape, tp: int) -> float:
    """LLMs and encoders shard weights over TP; DiTs (sequence parallel), VAEs and vocoders
    (batch split) replicate them on every GPU."""
    if shape.kind is ComponentKind.GENERATOR and shape.generator in (
        GeneratorKind.DIT, GeneratorKind.VAE, GeneratorKind.VOCODER
    ):
        return shape.weight_bytes
    return shape.weight_bytes / tp


def kv_bytes_per_token(shapes: Sequence[Shape], tp: int) -> float:
    """KV bytes per token per GPU of the LLMs among ``shapes`` (KV heads split over TP, each GPU
    holding ``ceil(heads / tp)``); 0 when none is an LLM."""
    return sum(s.kv_bytes_per_token * math.ceil(s.kv_heads / tp) / s.kv_heads
               for s in shapes if s.kind is ComponentKind.LLM)


def footprint(shapes: Sequence[Shape], cfg: ExecutorConfig, policy: MemoryPolicy) -> MemoryFootprint:
    """Per-GPU memory of an executor hosting ``shapes``; never raises (see :func:`check_fits`)."""
    names = tuple(s.name for s in shapes)
    capacity = cfg.gpu.memory_bytes * policy.utilization
    weights = sum(weights_per_gpu(s, cfg.tp) for s in shapes)
    free = capacity - weights - policy.reserve_bytes
    llms = [s for s in shapes if s.kind is ComponentKind.LLM]
    per_token = kv_bytes_per_token(shapes, cfg.tp)
    tokens = int(max(free, 0.0) // per_token) if llms and per_token > 0 else 0
    return MemoryFootprint(
        components=names,
        gpu=cfg.gpu.name,
        tp=cfg.tp,
        capacity_bytes=capacity,
        weights_bytes=weights,
        reserve_bytes=policy.reserve_bytes,
        kv_bytes=max(free, 0.0) if llms else 0.0,
        kv_tokens=MappingProxyType({s.name: tokens for s in llms}),
    )


def check_fits(shapes: Sequence[Shape], cfg: ExecutorConfig, policy: MemoryPolicy) -> MemoryFootprint:
    fp = footprint(shapes, cfg, policy)
    if fp.needed_bytes > fp.capacity_bytes:
        raise InfeasibleConfig(fp.components, fp.gpu, fp.tp, fp.needed_bytes, fp.capacity_bytes,
                               f"weights {fp.weights_bytes / 1e9:.2f} GB + reserve "
                               f"{fp.reserve_bytes / 1e9:.2f} GB")
    if fp.kv_tokens and fp.kv_capacity_tokens < policy.min_kv_tokens:
        needed = fp.needed_bytes + policy.min_kv_tokens * kv_bytes_per_token(shapes, cfg.tp)
        raise InfeasibleConfig(fp.components, fp.gpu, fp.tp, needed, fp.capacity_bytes,
                               f"KV cache holds {fp.kv_capacity_tokens} tokens, "
                               f"at least {policy.min_kv_tokens} needed")
    return fp
