"""Value types of the performance model: executor configs, one iteration's roofline inputs,
memory footprints and the errors the cost model raises. All frozen; no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from omniplane.spec import GPUKind


@dataclass(frozen=True, eq=False)
class ExecutorConfig:
    """One executor: ``tp`` GPUs of kind ``gpu`` running up to ``max_batch`` requests at once.

    ``tp`` is the number of GPUs per executor. LLMs and encoders shard their weights over them
    (tensor parallelism); DiTs split the sequence (Ulysses-style sequence parallelism, weights
    replicated); VAEs and vocoders split the batch (weights replicated). See docs/reference/perf.md.

    Hashable and comparable by value (the GPU kind's name and hardware facts, ``tp``,
    ``max_batch``), so configs can key caches and dicts.
    """

    gpu: GPUKind
    tp: int = 1
    max_batch: int = 1

    def __post_init__(self) -> None:
        if self.tp < 1 or self.tp & (self.tp - 1):
            raise ValueError(f"ExecutorConfig.tp must be a power of two >= 1, got {self.tp}")
        if self.max_batch < 1:
            raise ValueError(f"ExecutorConfig.max_batch must be >= 1, got {self.max_batch}")

    @property
    def key(self) -> tuple[str, int]:
        """The GPU kind by name and the TP degree (what the cost model's caches key on)."""
        return (self.gpu.name, self.tp)

    def _identity(self) -> tuple[object, ...]:
        g = self.gpu
        return (g.name, g.sms, g.memory_gb, g.bf16_tflops, g.mem_bw_gbs, g.interconnect_gbs,
                g.interconnect, self.tp, self.max_batch)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExecutorConfig) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())


@dataclass(frozen=True)
class Work:
    """One iteration's roofline inputs, per GPU of the executor.

    ``flops`` and ``bytes`` overlap (the iteration takes the longer of compute and memory time);
    ``overhead_s`` (launches, scheduling, per-sequence bookkeeping) and ``comm_s`` (collectives
    between the executor's GPUs) add to it.
    """

    flops: float
    bytes: float
    overhead_s: float = 0.0
    comm_s: float = 0.0

    def __add__(self, other: Work) -> Work:
        """Two pieces of work run back to back in one iteration (e.g. merged components)."""
        return Work(self.flops + other.flops, self.bytes + other.bytes,
                    self.overhead_s + other.overhead_s, self.comm_s + other.comm_s)

    def scaled(self, k: float) -> Work:
        return Work(self.flops * k, self.bytes * k, self.overhead_s * k, self.comm_s * k)


ZERO_WORK = Work(0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class MemoryFootprint:
    """Memory of one executor, per GPU, in bytes.

    ``weights_bytes`` sums every hosted component; ``kv_bytes`` is what is left for the KV cache;
    ``kv_tokens`` maps each hosted LLM to the KV tokens it can hold (the free memory is shared so
    that every LLM of the executor can hold the same number of tokens).
    """

    components: tuple[str, ...]
    gpu: str
    tp: int
    capacity_bytes: float  # usable memory per GPU (memory x utilisation)
    weights_bytes: float
    reserve_bytes: float  # activations and workspace
    kv_bytes: float
    kv_tokens: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def needed_bytes(self) -> float:
        return self.weights_bytes + self.reserve_bytes

    @property
    def kv_capacity_tokens(self) -> int:
        return min(self.kv_tokens.values()) if self.kv_tokens else 0


class InfeasibleConfig(ValueError):
    """An executor config cannot run: its weights (and minimum KV cache) exceed GPU memory.

    The message names the components, the GPU, the TP degree and needed vs available bytes.
    """

    def __init__(self, components: tuple[str, ...], gpu: str, tp: int, needed: float,
                 available: float, detail: str = "") -> None:
        self.components = components
        self.gpu = gpu
        self.tp = tp
        self.needed = needed
        self.available = available
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"executor [{'+'.join(components)}] does not fit on {gpu} x{tp}: needs "
            f"{needed / 1e9:.2f} GB per GPU, {available / 1e9:.2f} GB available{extra}"
        )


class OutsideProfile(LookupError):
    """A profile table was asked for a point outside its measured grid (strict mode only)."""
