"""``omniplane profile``: measure a live executor behind an OpenAI-compatible HTTP endpoint and
write a profile table the cost model loads. See :mod:`omniplane.perf.profiler.run`."""

from omniplane.perf.profiler.metrics import PointMetrics, RequestRecord, steady_window
from omniplane.perf.profiler.run import ProfilerError, ProfileRun, RequestSpec, SweepResult, run_profile

__all__ = [
    "PointMetrics",
    "ProfileRun",
    "ProfilerError",
    "RequestRecord",
    "RequestSpec",
    "SweepResult",
    "run_profile",
    "steady_window",
]
