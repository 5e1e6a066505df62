"""GPU kinds: the hardware facts the cost model needs, each number with its source."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints, model_validator

from omniplane.spec.base import Document, Name, PositiveFloat, PositiveInt, Sourced
from omniplane.spec.errors import SpecFieldError


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
    sms: PositiveInt
    memory_gb: PositiveFloat
    bf16_tflops: PositiveFloat
    mem_bw_gbs: PositiveFloat
    interconnect_gbs: PositiveFloat
    interconnect: Literal["nvlink", "pcie"]
    gpus_per_node: PositiveInt = 8
    # CUDA compute capability "major.minor" (https://developer.nvidia.com/cuda-gpus): the SM
    # partition rule of green contexts (omniplane.gpu.ladder) follows from it. None: not stated.
    compute_capability: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+$")] | None = None

    _sourced_text: ClassVar[frozenset[str]] = frozenset({"compute_capability"})

    def capability(self) -> tuple[int, int]:
        """(major, minor) of the compute capability; the one place it is read (ladders, stage
        configs). Raises ValueError naming the GPU when the catalog does not state it."""
        if self.compute_capability is None:
            raise ValueError(f"GPU {self.name}: compute_capability is not stated in its catalog entry")
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

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


# Compute capability per catalog GPU kind (https://developer.nvidia.com/cuda-gpus). It decides
# the green-context SM partition rule (omniplane.sched.ladder) of the simulated and the deployed
# SM ladder alike; read it through compute_capability() only, so that a catalog field can
# replace this table without touching any reader.
COMPUTE_CAPABILITY: dict[str, tuple[int, int]] = {
    "A100-80GB": (8, 0),
    "H100-SXM": (9, 0),
    "H200": (9, 0),
    "L40S": (8, 9),
    "RTX6000Ada": (8, 9),
    "RTXPRO6000": (12, 0),
}


def compute_capability(gpu: GPUKind) -> tuple[int, int]:
    """``(major, minor)`` of a GPU kind: the catalog entry's ``compute_capability`` when it has
    one (``"9.0"``), else :data:`COMPUTE_CAPABILITY`; a clear error for a kind in neither."""
    field = getattr(gpu, "compute_capability", None)
    if field is not None:
        major, _, minor = str(field).partition(".")
        return int(major), int(minor or 0)
    if gpu.name not in COMPUTE_CAPABILITY:
        raise KeyError(f"GPU kind {gpu.name!r}: compute capability unknown (add compute_capability: "
                       f"'MAJOR.MINOR' to its catalog entry); known: {', '.join(COMPUTE_CAPABILITY)}")
    return COMPUTE_CAPABILITY[gpu.name]
