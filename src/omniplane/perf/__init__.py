"""Performance model: the cost of every component on every GPU kind, validated against public
measurements, and a profiler that replaces it with measurements.

Pure Python + numpy/scipy; never imports torch, CUDA, vLLM or Ray. See docs/reference/perf.md.
"""

from omniplane.perf.colocation import ColocationModel, ColocationParams, StageTiming
from omniplane.perf.costmodel import GUIDANCE_PASSES, CostModel, Fallback
from omniplane.perf.factors import Calibration, Efficiency, KindFactors, load_calibration
from omniplane.perf.memory import MemoryPolicy
from omniplane.perf.profiles import ProfileFormatError, ProfileRow, ProfileSet
from omniplane.perf.types import (
    ExecutorConfig,
    InfeasibleConfig,
    MemoryFootprint,
    OutsideProfile,
    Work,
)

__all__ = [
    "GUIDANCE_PASSES",
    "Calibration",
    "ColocationModel",
    "ColocationParams",
    "CostModel",
    "Efficiency",
    "ExecutorConfig",
    "Fallback",
    "InfeasibleConfig",
    "KindFactors",
    "MemoryFootprint",
    "MemoryPolicy",
    "OutsideProfile",
    "ProfileFormatError",
    "ProfileRow",
    "ProfileSet",
    "StageTiming",
    "Work",
    "load_calibration",
]
