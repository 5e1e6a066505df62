"""Executor types: which components one executor may host and its configuration knobs."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from omniplane.spec.base import Name, NotBool, Seconds, SpecModel, check_source

MAX_TP = 1024  # assumption: no executor spans more than 1,024 GPUs
MAX_BATCH = 1_000_000  # assumption: far beyond any engine's max_num_seqs
TP = Annotated[int, NotBool, Field(gt=0, le=MAX_TP)]
Batch = Annotated[int, NotBool, Field(gt=0, le=MAX_BATCH)]


class ExecutorType(SpecModel):
    """An executor the runtime can instantiate.

    ``hosts`` is the exact set of components it runs; several components form a merged
    executor and must be joined by colocatable edges. ``tp`` lists allowed GPUs per executor
    (tensor-parallel degree, powers of two), ``max_batch`` the allowed maximum batch sizes.
    """

    name: Name
    hosts: Annotated[list[Name], Field(min_length=1)]
    tp: Annotated[list[TP], Field(min_length=1)] = Field(default_factory=lambda: [1])
    max_batch: Annotated[list[Batch], Field(min_length=1)] = Field(default_factory=lambda: [1])
    # For encoders: CPU preprocessing time per item that overlaps with GPU work when busy
    # (Cornfigurator section 5.2); seconds.
    cpu_seconds_per_item: Seconds = 0.0
    source: Annotated[str, AfterValidator(check_source)] | None = None  # for the numbers above

    @field_validator("tp")
    @classmethod
    def _powers_of_two(cls, v: list[int]) -> list[int]:
        bad = [t for t in v if t & (t - 1)]
        if bad:
            raise ValueError(f"tensor-parallel degrees must be powers of two, got {bad}")
        if len(set(v)) != len(v):
            raise ValueError("tp lists a degree more than once")
        return sorted(v)

    @field_validator("max_batch")
    @classmethod
    def _unique_batch(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("max_batch lists a size more than once")
        return sorted(v)

    @field_validator("hosts")
    @classmethod
    def _unique_hosts(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("hosts lists a component more than once")
        return v

    @property
    def host_set(self) -> frozenset[str]:
        return frozenset(self.hosts)
