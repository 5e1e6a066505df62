"""GPU memory of vLLM-Omni's stages as the runtime loads them, and the ``gpu_memory_utilization``
each stage gets from it.

:mod:`omniplane.perf.memory` sizes the planner's executors (the plan's component split).
vLLM-Omni runs a model as its own stages (:mod:`omniplane.spec.layout`): the thinker stage
loads every encoder with the thinker, whatever the plan split off. Here each stage of one
device is one vLLM process, and per GPU it holds:

weights       every component the stage loads (LLMs and encoders sharded over TP); encoders
              of one stage with the same architecture (parameters, layers, hidden size) are
              one module of the checkpoint and are counted once (derived: Qwen3-Omni's
              vision tower serves the image and the video encoder)
context       CUDA context, cuBLAS and NCCL workspaces: ``CUDA_CONTEXT_BYTES`` (assumption);
              vLLM counts them as non-torch memory inside the stage's share
              (vllm/v1/worker/gpu_worker.py ``determine_available_memory``)
activations   the peak of vLLM's profile run at ``max_num_batched_tokens`` (derived estimate,
              :func:`activation_bytes`), also inside the stage's share
cuda graphs   ``GRAPH_RESERVE_BYTES`` per stage that captures graphs (not ``enforce_eager``):
              vLLM profiles graph memory inside the share (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS,
              on by default) and vLLM-Omni's admission reserves it again outside
kv            what is left of the stage's share: vLLM gives a stage
              ``total x gpu_memory_utilization - weights - activations - non-torch`` of KV
              (vllm_omni/worker/base.py ``determine_available_memory``)

Per device vLLM-Omni admits stages while (vllm_omni/engine/stage_admission.py ``evaluate``)::

    sum(capacity x utilization) + sum(graph reserves) + 1 GiB external + 1 GiB margin <= capacity

The device's capacity is the catalog's ``memory_gb`` (A100-80GB: 80e9 bytes, 74.5 GiB; the
device reports a little more, so the fractions err on the safe side). KV is sized for the
planned max batch at the workload's context (prompt + output tokens a sequence holds when it
finishes, mean and p95, rounded up to vLLM's 16-token blocks). A stage that cannot hold its
weights, reserve and one p95 sequence is infeasible: :class:`StageMemoryError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from omniplane.perf.memory import kv_bytes_per_token, weights_per_gpu
from omniplane.perf.shapes import ACT_BYTES, Shape, shape_of
from omniplane.spec import ComponentKind, GPUKind, ModelSpec
from omniplane.spec.layout import VllmOmniLayout

GIB = float(2**30)
CUDA_CONTEXT_BYTES = 0.5 * GIB  # assumption: CUDA context + cuBLAS/NCCL workspaces per process
GRAPH_RESERVE_BYTES = 2 * GIB  # vllm_omni/engine/stage_admission.py _DEFAULT_GRAPH_RESERVE_BYTES
# vllm_omni/engine/stage_admission.py: _DEFAULT_EXTERNAL_RESERVE_BYTES + _DEFAULT_SAFETY_MARGIN_BYTES
DEVICE_RESERVE_BYTES = 2 * GIB
KV_BLOCK_TOKENS = 16  # vLLM's default block_size (CacheConfig)
DEFAULT_BATCHED_TOKENS = 8192  # vLLM's default max_num_batched_tokens for online serving (assumption)
VLLM_DEFAULT_UTILIZATION = 0.9  # vLLM's CacheConfig.gpu_memory_utilization default
UTIL_STEP = 0.001  # fractions are written with 3 decimals, rounded down


class StageMemoryError(ValueError):
    """A vLLM-Omni stage cannot hold its weights, runtime reserve and one sequence's KV."""


@dataclass(frozen=True)
class Context:
    """KV tokens one sequence of a stage holds when it finishes: mean and p95 over requests."""

    mean: float
    p95: float
    requests: int

    def blocks(self, tokens: float) -> int:
        return math.ceil(max(tokens, 1.0) / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS


def contexts(model: ModelSpec, works: Iterable[Mapping[str, Mapping[str, float]]]) -> dict[str, Context]:
    """Per LLM component: the context (prompt + output tokens) of the requests that reach it."""
    per: dict[str, list[float]] = {c.name: [] for c in model.components if c.kind is ComponentKind.LLM}
    for w in works:
        for name, vals in per.items():
            if name in w:
                q = w[name]
                vals.append(float(q.get("prompt_tokens", 0.0)) + float(q.get("output_tokens", 0.0)))
    return {n: Context(float(np.mean(v)), float(np.percentile(v, 95)), len(v)) for n, v in per.items() if v}


def activation_bytes(shape: Shape, intermediate: int | None, tokens: int) -> float:
    """Peak activations of a profile run over ``tokens`` tokens (derived estimate): BF16 hidden
    states in and out, the attention's q/k/v and output (4 x hidden) plus the MLP's gate, up and
    down intermediates of every active expert (3 x active experts x intermediate); an encoder
    runs ``seq_per_token`` positions per output token."""
    width = 4.0 * shape.hidden + 3.0 * max(shape.active_experts, 1) * float(intermediate or 0)
    positions = tokens * (shape.seq_per_token if shape.kind is ComponentKind.ENCODER else 1.0)
    return ACT_BYTES * positions * width


@dataclass(frozen=True)
class StageMemory:
    """One stage's memory per GPU, in bytes (module docstring)."""

    stage_id: int
    name: str  # vLLM-Omni's model_stage
    components: tuple[str, ...]
    tp: int
    max_batch: int
    weights_bytes: float
    context_bytes: float
    activation_bytes: float
    graph_bytes: float
    kv_per_token: float  # bytes per KV token per GPU (0: no KV cache)
    context: Context | None
    utilization: float = 0.0
    capacity_bytes: float = 0.0

    @property
    def reserve_bytes(self) -> float:
        return self.context_bytes + self.activation_bytes + self.graph_bytes

    @property
    def fixed_bytes(self) -> float:
        return self.weights_bytes + self.reserve_bytes

    @property
    def kv_bytes(self) -> float:
        if not self.kv_per_token:
            return 0.0
        return max(0.0, self.utilization * self.capacity_bytes - self.fixed_bytes)

    @property
    def kv_tokens(self) -> int:
        return int(self.kv_bytes // self.kv_per_token) if self.kv_per_token else 0

    def seqs(self, tokens: float) -> int:
        """Sequences of ``tokens`` context the KV cache holds (whole blocks each)."""
        if not self.kv_per_token or self.context is None:
            return 0
        return self.kv_tokens // self.context.blocks(tokens)

    def kv_for(self, n: int) -> float:
        """KV bytes of ``n`` sequences at the p95 context."""
        if not self.kv_per_token or self.context is None:
            return 0.0
        return n * self.context.blocks(self.context.p95) * self.kv_per_token

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stage_id": self.stage_id, "stage": self.name, "components": list(self.components), "tp": self.tp,
            "gpu_memory_utilization": self.utilization, "weights_gib": _gib(self.weights_bytes),
            "reserve_gib": {"cuda_context": _gib(self.context_bytes),
                            "activations": _gib(self.activation_bytes),
                            "cuda_graphs": _gib(self.graph_bytes)},
            "kv_gib": _gib(self.kv_bytes), "kv_tokens": self.kv_tokens, "max_batch": self.max_batch,
        }
        if self.context is not None and self.kv_per_token:
            out["context_tokens"] = {"mean": round(self.context.mean, 1), "p95": round(self.context.p95, 1)}
            out["seqs_fit"] = {"mean": self.seqs(self.context.mean), "p95": self.seqs(self.context.p95)}
        return out


@dataclass(frozen=True)
class DeviceMemory:
    """The stages sharing one device (each of its TP GPUs alike), sized and given their shares."""

    gpu: str
    capacity_bytes: float
    stages: tuple[StageMemory, ...]

    @property
    def limit_bytes(self) -> float:
        """What vLLM-Omni's admission leaves for the stages' shares on this device."""
        return self.capacity_bytes - DEVICE_RESERVE_BYTES - sum(s.graph_bytes for s in self.stages)

    @property
    def utilization(self) -> float:
        return round(sum(s.utilization for s in self.stages), 6)

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "capacity_gib": _gib(self.capacity_bytes),
                "utilization_sum": self.utilization,
                "utilization_limit": round(self.limit_bytes / self.capacity_bytes, 4),
                "stages": [s.to_json() for s in self.stages]}


def _gib(x: float) -> float:
    return round(x / GIB, 2)


def stage_shapes(model: ModelSpec, components: Sequence[str]) -> list[Shape]:
    """The shapes a stage loads, an encoder of the same architecture as one before it dropped."""
    out: list[Shape] = []
    seen: set[tuple[float, int, int]] = set()
    for name in components:
        s = shape_of(model.component(name))
        key = (s.params, s.layers, s.hidden)
        if s.kind is ComponentKind.ENCODER:
            if key in seen:
                continue
            seen.add(key)
        out.append(s)
    return out


def stage_memory(model: ModelSpec, layout: VllmOmniLayout, entry: Mapping[str, Any],
                 ctx: Mapping[str, Context]) -> StageMemory:
    """The fixed memory of one stage of a deploy document's ``entry`` (its shares not set yet)."""
    sid = int(entry["stage_id"])
    st = next(s for s in layout.stages if s.stage_id == sid)
    tp = int(entry.get("tensor_parallel_size") or 1)
    shapes = stage_shapes(model, st.components)
    tokens = int(entry.get("max_num_batched_tokens") or DEFAULT_BATCHED_TOKENS)
    act = max(activation_bytes(s, model.component(s.name).size.intermediate, tokens) for s in shapes) / tp
    llms = [s for s in shapes if s.kind is ComponentKind.LLM]
    per_token = kv_bytes_per_token(shapes, tp)
    seq = [ctx[s.name] for s in llms if s.name in ctx]
    context = (Context(sum(c.mean for c in seq), sum(c.p95 for c in seq), min(c.requests for c in seq))
               if seq else None)
    return StageMemory(
        stage_id=sid, name=st.model_stage, components=tuple(st.components), tp=tp,
        max_batch=int(entry.get("max_num_seqs") or 1),
        weights_bytes=sum(weights_per_gpu(s, tp) for s in shapes), context_bytes=CUDA_CONTEXT_BYTES,
        activation_bytes=act, graph_bytes=0.0 if entry.get("enforce_eager") else GRAPH_RESERVE_BYTES,
        kv_per_token=per_token, context=context if per_token else None,
    )


def size_device(model: ModelSpec, layout: VllmOmniLayout, entries: Sequence[Mapping[str, Any]],
                gpu: GPUKind, ctx: Mapping[str, Context]) -> DeviceMemory:
    """Shares of the deploy ``entries`` that run on one device: each stage gets its weights,
    reserve and the KV of its max batch at the p95 context; what is left, up to vLLM's default
    share of 0.9 of the device, goes to the KV stages in proportion to that KV; short of it,
    every stage keeps one p95 sequence and the rest is split in proportion to what each still
    wants. Raises :class:`StageMemoryError` when even one sequence per stage does not fit."""
    cap = gpu.memory_bytes
    stages = [stage_memory(model, layout, e, ctx) for e in entries]
    dev = DeviceMemory(gpu.name, cap, tuple(stages))
    avail = dev.limit_bytes - UTIL_STEP * cap * len(stages)  # room for rounding down
    need = [s.fixed_bytes + s.kv_for(1) for s in stages]
    want = [s.fixed_bytes + s.kv_for(s.max_batch) for s in stages]
    if sum(need) > avail:
        raise _error(dev, need, avail)
    if sum(want) <= avail:  # up to vLLM's default share when that holds it, else to the limit
        top = min(avail, max(sum(want), VLLM_DEFAULT_UTILIZATION * cap))
        extra, kv = top - sum(want), [s.kv_for(s.max_batch) for s in stages]
        got = [w + (extra * k / sum(kv) if sum(kv) else 0.0) for w, k in zip(want, kv, strict=True)]
    else:
        short = [w - n for w, n in zip(want, need, strict=True)]
        room = avail - sum(need)
        got = [n + room * d / sum(short) for n, d in zip(need, short, strict=True)]
    # 3 decimals: down, but never below the stage's need (the slack taken off ``avail`` covers it)
    sized = tuple(_with_share(s, max(math.floor(g / cap / UTIL_STEP), math.ceil(n / cap / UTIL_STEP))
                              * UTIL_STEP, cap)
                  for s, g, n in zip(stages, got, need, strict=True))
    return DeviceMemory(gpu.name, cap, sized)


def _with_share(s: StageMemory, util: float, cap: float) -> StageMemory:
    return replace(s, utilization=round(util, 3), capacity_bytes=cap)


def _error(dev: DeviceMemory, need: list[float], avail: float) -> StageMemoryError:
    worst = max(range(len(dev.stages)), key=lambda i: dev.stages[i].weights_bytes)
    s = dev.stages[worst]
    others = [o.name for o in dev.stages if o is not s]
    with_others = f" with stage(s) {', '.join(others)} on the same device" if others else ""
    one = (f" + KV of one {s.context.blocks(s.context.p95):,}-token (p95) sequence {_gib(s.kv_for(1))} GiB"
           if s.context is not None else "")
    return StageMemoryError(
        f"vLLM-Omni stage {s.stage_id} {s.name!r} ({', '.join(s.components)}) does not fit on {dev.gpu} "
        f"(TP {s.tp}){with_others}: it needs weights {_gib(s.weights_bytes)} GiB + runtime reserve "
        f"{_gib(s.reserve_bytes)} GiB (CUDA context {_gib(s.context_bytes)}, activations "
        f"{_gib(s.activation_bytes)}, CUDA graphs {_gib(s.graph_bytes)}){one}; the device's stages need "
        f"{_gib(sum(need))} GiB of the {_gib(avail)} GiB vLLM-Omni admits per GPU "
        f"({_gib(dev.capacity_bytes)} GiB less its {_gib(DEVICE_RESERVE_BYTES)} GiB device reserve and the "
        "CUDA-graph reserves); use more GPUs per stage (TP), fewer stages per device, or a larger GPU"
    )


TABLE_HEAD = (f"  {'stage':<9} {'util':>5} {'weights':>7} {'reserve':>7} {'KV':>6} {'KV tokens':>9} "
              f"{'fit mean':>8} {'fit p95':>7} {'batch':>5}")


def device_rows(dev: Mapping[str, Any]) -> list[str]:
    """One device of the memory table, from :meth:`DeviceMemory.to_json`: a row per stage (GiB;
    the sequences of the mean and p95 context its KV cache holds) and the shares' sum."""
    lines = []
    for s in dev["stages"]:
        fit = s.get("seqs_fit")
        seqs = f"{fit['mean']:>8} {fit['p95']:>7}" if fit else f"{'-':>8} {'-':>7}"
        lines.append(
            f"  {s['stage'][:9]:<9} {s['gpu_memory_utilization']:>5.3f} {s['weights_gib']:>7.2f} "
            f"{sum(s['reserve_gib'].values()):>7.2f} {s['kv_gib']:>6.2f} {s['kv_tokens']:>9,} "
            f"{seqs} {s['max_batch']:>5}")
    lines.append(f"  {'sum':<9} {dev['utilization_sum']:>5.3f} (vLLM-Omni admits "
                 f"{dev['utilization_limit']:.3f})")
    return lines


def render(devices: Mapping[str, DeviceMemory]) -> str:
    """The memory table of sized devices, keyed by where each is (a node's device, a file's)."""
    lines = ["memory per GPU (GiB; vLLM-Omni's stages as the runtime loads them)", TABLE_HEAD]
    for where, dev in devices.items():
        lines.append(f"{where} ({dev.gpu}) {dev.capacity_bytes / GIB:.1f} GiB:")
        lines += device_rows(dev.to_json())
    return "\n".join(lines)
