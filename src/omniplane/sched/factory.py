"""The one place that maps a policy name to a policy object and a GPU co-location mode.

==================  ==========================================  =====================
name                policy                                      co-location mode
==================  ==========================================  =====================
``horizon``         HorizonServe (rotation, guard, cap, SMs)    ``split`` (SM cap)
``vanilla``         FCFS (vLLM-Omni unmodified)                 ``timeslice``
``edf``             earliest deadline first                     ``timeslice``
``mps``             FCFS                                        ``mps``
``edf-mps``         earliest deadline first                     ``mps``
``no-rotation``     HorizonServe without N:M path rotation      ``split``
``no-sm-throttle``  HorizonServe without SM throttling          ``mps``
==================  ==========================================  =====================

Ablations (section 6.4) remove one side of the joint policy and keep the other:
``no-rotation`` removes shared-stage path rotation, section 4.3 (the N:M phases and with them
the long-path admission cap: "removing path rotation lets long-path bursts occupy shared-stage
opportunities"), so the base scheduler sees the whole queue, and keeps SM throttling;
``no-sm-throttle`` keeps the whole temporal scheduler but publishes no cap, so the stages
co-run unconstrained (MPS), "exposing requests to co-running interference once downstream
generation is active".
"""

from __future__ import annotations

from dataclasses import replace

from omniplane.policy import FCFS, Policy
from omniplane.sched.baselines import EDF
from omniplane.sched.calibration import OfflineCalibration
from omniplane.sched.horizon import HorizonConfig, HorizonServe

POLICIES = ("horizon", "vanilla", "edf", "mps", "edf-mps", "no-rotation", "no-sm-throttle")
BASELINES = ("vanilla", "edf", "mps", "edf-mps")
ABLATIONS = ("no-rotation", "no-sm-throttle")


def make_policy(name: str, calibration: OfflineCalibration, config: HorizonConfig | None = None, *,
                record: bool = False) -> tuple[Policy, str]:
    """``(policy, co-location mode)`` for ``name`` (one of :data:`POLICIES`)."""
    cfg = config or HorizonConfig()
    slo = calibration.slo.as_dict()
    if name == "horizon":
        return HorizonServe(calibration.profiles, calibration.ladder, cfg, record=record), "split"
    if name == "vanilla":
        return FCFS(), "timeslice"
    if name == "edf":
        return EDF(slo), "timeslice"
    if name == "mps":
        return FCFS(), "mps"
    if name == "edf-mps":
        return EDF(slo, name="edf-mps"), "mps"
    if name == "no-rotation":
        ablated = replace(cfg, rotation=replace(cfg.rotation, rotate=False, cap_long=False))
        return HorizonServe(calibration.profiles, calibration.ladder, ablated, name=name,
                            record=record), "split"
    if name == "no-sm-throttle":
        ablated = replace(cfg, spatial=replace(cfg.spatial, throttle=False))
        return HorizonServe(calibration.profiles, calibration.ladder, ablated, name=name,
                            record=record), "mps"
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
