"""GPU kinds: the hardware facts the cost model needs, each number with its source."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints, model_validator

from omniplane.spec.base import Document, Name, NotBool, Sourced
from omniplane.spec.errors import SpecFieldError

# assumptions far beyond any GPU: 100k SMs, 100 TB of memory, an exaFLOP/s, a PB/s
Hardware = Annotated[float, NotBool, Field(gt=0, le=1e6)]
ProductLabel = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")]  # k8s label


class GPUKind(Sourced):
    """One GPU model.

    Units: ``memory_gb`` in GB (10^9 bytes) as printed in the datasheet; ``bf16_tflops`` dense
    (no sparsity) BF16 tensor throughput in 10^12 FLOP/s; ``mem_bw_gbs`` and
    ``interconnect_gbs`` in GB/s. ``interconnect_gbs`` is the datasheet's per-GPU figure
    (NVLink: bidirectional aggregate; PCIe: bidirectional x16); the cost model uses half of
    it per direction.
    """

    name: Name
    aliases: list[Name] = Field(default_factory=list)
    sms: Annotated[int, NotBool, Field(gt=0, le=100_000)]
    memory_gb: Annotated[float, NotBool, Field(gt=0, le=1e5)]
    bf16_tflops: Hardware
    mem_bw_gbs: Hardware
    interconnect_gbs: Hardware
    interconnect: Literal["nvlink", "pcie"]
    gpus_per_node: Annotated[int, NotBool, Field(gt=0, le=1024)] = 8
    # CUDA compute capability "major.minor" (https://developer.nvidia.com/cuda-gpus): the SM
    # partition rule of green contexts (omniplane.sched.ladder) follows from it. None: not
    # stated. Read it through compute_capability() below.
    compute_capability: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+$")] | None = None
    # the value of the Kubernetes node label nvidia.com/gpu.product that NVIDIA's GPU feature
    # discovery publishes for this kind (the export's KubeRay worker groups select on it). None: not
    # stated (a KubeRay export of a plan on this kind is refused naming it).
    gpu_product_label: ProductLabel | None = None

    _sourced_text: ClassVar[frozenset[str]] = frozenset({"compute_capability", "gpu_product_label"})

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def flops(self) -> float:
        return self.bf16_tflops * 1e12

    @property
    def mem_bw(self) -> float:
        """Bytes per second."""
        return self.mem_bw_gbs * 1e9

    @property
    def link_bw(self) -> float:
        """Bytes per second per direction between two GPUs of one node."""
        return self.interconnect_gbs * 1e9 / 2


class GPUCatalog(Document):
    """A file of GPU kinds (``kind: gpus``)."""

    kind: Literal["gpus"] = "gpus"
    gpus: Annotated[list[GPUKind], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique(self) -> GPUCatalog:
        seen: dict[str, int] = {}
        issues = []
        for i, gpu in enumerate(self.gpus):
            for key in (gpu.name, *gpu.aliases):
                low = key.lower()
                if low in seen and seen[low] != i:
                    issues.append(
                        ((("gpus", i, "name")), f"duplicate GPU name or alias {key!r} "
                         f"(already used by gpus[{seen[low]}])")
                    )
                seen[low] = i
        if issues:
            raise SpecFieldError(issues)
        return self

    def get(self, name: str) -> GPUKind:
        low = name.lower()
        for gpu in self.gpus:
            if gpu.name.lower() == low or low in (a.lower() for a in gpu.aliases):
                return gpu
        raise KeyError(
            f"unknown GPU kind {name!r}; known: {', '.join(g.name for g in self.gpus)}"
        )

    def names(self) -> list[str]:
        return [g.name for g in self.gpus]


def compute_capability(gpu: GPUKind) -> tuple[int, int]:
    """``(major, minor)`` of a GPU kind, from its catalog entry's ``compute_capability``
    (``catalog/gpus.yaml``). It decides the green-context SM partition rule
    (omniplane.sched.ladder) of the simulated and the deployed SM ladder alike; this is the one
    reader. A clear error for a kind whose entry does not state it."""
    if gpu.compute_capability is None:
        raise KeyError(f"GPU kind {gpu.name!r}: compute capability unknown (add compute_capability: "
                       "'MAJOR.MINOR' to its catalog entry)")
    major, _, minor = gpu.compute_capability.partition(".")
    return int(major), int(minor)
