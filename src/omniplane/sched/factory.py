"""The one place that maps a policy name to its class and GPU co-location mode, for the
simulator (``omniplane.repro.horizon.experiment``) and for vLLM (``omniplane.vllm.policies``) alike.

==================  ==========================================  =====================
name                policy                                      co-location mode
==================  ==========================================  =====================
``horizon``         HorizonServe (rotation, guard, cap, SMs)    ``split`` (SM cap)
``vanilla``         FCFS (vLLM-Omni unmodified); alias ``fcfs``  ``timeslice``
``edf``             earliest deadline first                     ``timeslice``
``mps``             FCFS                                        ``mps``
``edf-mps``         earliest deadline first                     ``mps``
``no-rotation``     HorizonServe without N:M path rotation      ``split``
``no-sm-throttle``  HorizonServe without SM throttling          ``mps``
``static-split``    FCFS, shared stage fixed at ``S_cap`` SMs    ``split`` (fixed)
``edf-split``       EDF, shared stage fixed at ``S_cap`` SMs     ``split`` (fixed)
``horizon-hide-     HorizonServe, rotation hides non-phase      ``split`` (SM cap)
always``            prefills even when the phase has no work
``static-cap``      FCFS, shared stage fixed at the capacity-   ``split`` (fixed)
                    curve cap (SGLang-Omni)
``priority``        vLLM's priority order by request class      ``timeslice``
==================  ==========================================  =====================

``static-cap`` and ``priority`` are baselines that ship today (:mod:`omniplane.sched.baselines`);
``static-cap`` needs its cap (``static_cap``, from :func:`omniplane.sched.calibration.capacity_cap`).

``static-split`` and ``edf-split`` are attribution baselines (not in the paper): the split
HorizonServe's ladder tops out at, held on every step, so the difference to HorizonServe is
what *moving* the cap (and the temporal scheduler) adds beyond a fixed split.
``horizon-hide-always`` is the unconditional rotation of the paper's text (``RotationConfig.
conserve = False``); ``horizon`` is work-conserving (:mod:`omniplane.sched.temporal`).

Ablations (section 6.4) remove one side of the joint policy and keep the other:
``no-rotation`` removes shared-stage path rotation, section 4.3 (the N:M phases and with them
the long-path admission cap: "removing path rotation lets long-path bursts occupy shared-stage
opportunities"), so the base scheduler sees the whole queue, and keeps SM throttling;
``no-sm-throttle`` keeps the whole temporal scheduler but publishes no cap, so the stages
co-run unconstrained (MPS), "exposing requests to co-running interference once downstream
generation is active".

A policy is built from what online serving looks up (section 4.2): the class profiles (each
class's path and SLO, and the ``r_hat`` costs) and the SM ladder. The simulator takes them from
the offline calibration (``OfflineCalibration.profiles`` / ``.ladder``), vLLM from its settings
(``omniplane.sched.serving``). The co-location mode is what the GPU must do beside the policy:
the simulator models it, a deployment provides it (green contexts for ``split``, MPS for
``mps``). This module loads no cost model, simulator or spec module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

from omniplane.policy import FCFS, Policy
from omniplane.sched.baselines import EDF, ClassPriority, FixedSplit
from omniplane.sched.horizon import HorizonConfig, HorizonServe
from omniplane.sched.ladder import Ladder
from omniplane.sched.profiler import ClassProfile

Mode = Literal["split", "timeslice", "mps"]

POLICIES = ("horizon", "vanilla", "edf", "mps", "edf-mps", "no-rotation", "no-sm-throttle",
            "static-split", "edf-split", "horizon-hide-always", "static-cap", "priority")
BASELINES = ("vanilla", "edf", "mps", "edf-mps")  # the paper's (section 6.1)
ATTRIBUTION = ("static-split", "edf-split")  # fixed-split baselines (not in the paper)
ABLATIONS = ("no-rotation", "no-sm-throttle")
VARIANTS = ("horizon-hide-always",)
SHIPPED = ("static-cap", "priority")  # baselines that ship today (SGLang-Omni, vLLM); and ``edf``
SIMULATOR_ONLY = ("static-cap",)  # its cap needs the calibration's fixed-SM sweep
ALIASES = {"fcfs": "vanilla"}  # vLLM's name for its own scheduling order


def canonical(name: str) -> str:
    """The policy's name in :data:`POLICIES` (aliases resolved); a clear error otherwise."""
    name = ALIASES.get(name, name)
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)} "
                         f"(or the alias{'es' if len(ALIASES) > 1 else ''} {', '.join(ALIASES)})")
    return name


def make_policy(name: str, profiles: Mapping[str, ClassProfile], ladder: Ladder,
                config: HorizonConfig | None = None, *, record: bool = False,
                static_cap: int | None = None) -> tuple[Policy, Mode]:
    """``(policy, co-location mode)`` for ``name`` (one of :data:`POLICIES` or an alias);
    ``static_cap``: the SM cap of ``static-cap`` (required for it, ignored otherwise)."""
    name = canonical(name)
    cfg = config or HorizonConfig()
    if name in ("vanilla", "mps"):
        return FCFS(name), "timeslice" if name == "vanilla" else "mps"
    if name in ("edf", "edf-mps", "edf-split"):
        slo = {c: p.slo_s for c, p in profiles.items()}  # inf: a class without a deadline goes last
        if name == "edf-split":
            return FixedSplit(EDF(slo, name="edf"), ladder.s_cap, name=name), "split"
        return EDF(slo, name=name), "timeslice" if name == "edf" else "mps"
    if name == "static-cap":
        if static_cap is None:
            raise ValueError("policy 'static-cap' needs its SM cap (static_cap, from the one-sided capacity "
                             "curve: omniplane.sched.calibration.capacity_cap of a fixed-SM sweep)")
        return FixedSplit(FCFS("vanilla"), static_cap, name=name), "split"
    if name == "priority":
        return ClassPriority.by_path({c: p.path for c, p in profiles.items()}, name=name), "timeslice"
    if name == "static-split":
        return FixedSplit(FCFS("vanilla"), ladder.s_cap, name=name), "split"
    if name == "horizon-hide-always":
        cfg = replace(cfg, rotation=replace(cfg.rotation, conserve=False))
    if name == "no-rotation":
        cfg = replace(cfg, rotation=replace(cfg.rotation, rotate=False, cap_long=False))
    elif name == "no-sm-throttle":
        cfg = replace(cfg, spatial=replace(cfg.spatial, throttle=False))
    mode: Mode = "mps" if name == "no-sm-throttle" else "split"
    return HorizonServe(profiles, ladder, cfg, name=name, record=record), mode
