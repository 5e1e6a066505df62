"""SLO-aware single-GPU scheduling after HorizonServe (arXiv:2608.01785, section 4).

A policy is a plain object behind :mod:`omniplane.sim.policy`'s interface, so the simulator
drives it now and vLLM's scheduler later. Pieces: the request profiler (:mod:`.profiler`), the
temporal scheduler (:mod:`.temporal`), the spatial controller (:mod:`.spatial`), offline
calibration (:mod:`.calibration`), the policy composing them (:mod:`.horizon`), the baselines
(:mod:`.baselines`) and the one factory mapping names to ``(policy, co-location mode)``
(:mod:`.factory`). The paper's experiments are in :mod:`.experiment` (``omniplane experiment
horizon``). Never imports torch, CUDA, vLLM or Ray. See docs/sched.md.
"""

from omniplane.sched.baselines import EDF
from omniplane.sched.calibration import OfflineCalibration, SLOTable, calibrate
from omniplane.sched.factory import ABLATIONS, BASELINES, POLICIES, make_policy
from omniplane.sched.horizon import HorizonConfig, HorizonServe
from omniplane.sched.profiler import ClassProfile, Path, ProfilerConfig, RequestProfiler, RequestSignals
from omniplane.sched.spatial import SMLadder, SpatialConfig, SpatialController, SpatialDecision
from omniplane.sched.temporal import RotationConfig, TemporalScheduler, TemporalView

__all__ = [
    "ABLATIONS",
    "BASELINES",
    "EDF",
    "POLICIES",
    "ClassProfile",
    "HorizonConfig",
    "HorizonServe",
    "OfflineCalibration",
    "Path",
    "ProfilerConfig",
    "RequestProfiler",
    "RequestSignals",
    "RotationConfig",
    "SLOTable",
    "SMLadder",
    "SpatialConfig",
    "SpatialController",
    "SpatialDecision",
    "TemporalScheduler",
    "TemporalView",
    "calibrate",
    "make_policy",
]
