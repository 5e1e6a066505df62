"""Workloads: arrival processes, request-type mixes and real production traces.

One layer shared by the simulator, the planner, the scheduler experiments and the load
generator. :func:`generate` turns a workload spec into the requests of a run; traces load
with :func:`load_trace`. Imports only :mod:`omniplane.spec`, numpy, scipy and the standard
library (see docs/reference/workloads.md).
"""

from omniplane.workload.arrivals import arrival_times, gamma_shape, mean_rate, weibull_cv, weibull_shape
from omniplane.workload.generate import generate, replay
from omniplane.workload.load import FORMATS, infer_format, load_trace, resolve_trace
from omniplane.workload.mapping import assign_types, given_sizes
from omniplane.workload.request import Request, load_requests, rebase, save_requests
from omniplane.workload.servegen import ServeGen, load_servegen
from omniplane.workload.sizes import resolve_arrays, sample_sizes
from omniplane.workload.stats import Summary, summarize_requests, summarize_trace
from omniplane.workload.trace import Trace, TraceError, TraceIssue

__all__ = [
    "FORMATS",
    "Request",
    "ServeGen",
    "Summary",
    "Trace",
    "TraceError",
    "TraceIssue",
    "arrival_times",
    "assign_types",
    "gamma_shape",
    "generate",
    "given_sizes",
    "infer_format",
    "load_requests",
    "load_servegen",
    "load_trace",
    "mean_rate",
    "rebase",
    "replay",
    "resolve_arrays",
    "resolve_trace",
    "sample_sizes",
    "save_requests",
    "summarize_requests",
    "summarize_trace",
    "weibull_cv",
    "weibull_shape",
]
