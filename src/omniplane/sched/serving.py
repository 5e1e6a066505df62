"""Any policy of the factory configured from a serving deployment instead of the performance
model.

Inside vLLM (``omniplane.vllm.policies``) the scheduler knows the request classes of its
settings (each a path and an SLO, from the SLO table the operator measured), the GPU's SM
count, the SM ladder the GPU backend realises (:func:`omniplane.sched.ladder.build_ladder`, the
builder the offline calibration uses) and free-form ``policy_options``. This module turns those
into class profiles and hands them, with the ladder, to :func:`omniplane.sched.factory.make_policy`,
so the simulator and vLLM build the same object for every name (``vanilla``/``fcfs``, ``edf``,
``mps``, ``edf-mps``, ``horizon`` and the ablations). It reads no model spec and runs no cost
model: a vLLM process that loads it loads no simulator or perf module.

``policy_options`` (all optional; an unknown key is an error)::

    u_guard: 1.5             ProfilerConfig.u_guard
    m: 2, n_min: 2, n_max: 8, long_cap: 2, rotate: true, cap_long: true     RotationConfig
    gamma: 0.4, b_sat: 0.93, delta_step: 1, throttle: true                   SpatialConfig
    slo_multiplier: 5        SLO = multiplier x solo p95 (for the default profile below)
    default_slo_s: S         the deadline of a class without an SLO (default below)
    profiles: {CLASS: {prefill_s_per_token, step_s, decode_s_per_token, decode_tokens,
                       downstream_s}}      measured class profiles (seconds), e.g. the
                                           "profiles" of ``OfflineCalibration.to_json()``
    calibration: PATH        a JSON file holding such a "profiles" mapping (inline wins)

A class without a measured profile gets ``r_hat = SLO / slo_multiplier`` while its prompt is
not prefilled (assumption: the solo p95 the SLO was derived from, section 6.1, as the time to
first response of a request that has not started) and nothing after; only waiting requests'
``r_hat`` drives protection, since admitted ones are never hidden. A class without an SLO gets
a finite deadline, ``default_slo_s`` (default: the most lenient SLO of the table, or
:data:`NO_SLO_DEFAULT_S` when no class has one; an assumption, so that such a class ages into
protection and cannot starve behind rotation or the long-path cap while the engine has room).

Without a ladder (no SM control on this GPU, or ``total_sms`` 0) or with ``throttle: false``
no cap is published; rotation, the slack guard and the long-path cap still run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from omniplane.policy import PathClass, Policy
from omniplane.sched.factory import ATTRIBUTION, Mode, make_policy
from omniplane.sched.horizon import HorizonConfig
from omniplane.sched.ladder import Ladder, PartitionRule
from omniplane.sched.profiler import ClassProfile, ProfilerConfig
from omniplane.sched.spatial import SpatialConfig
from omniplane.sched.temporal import RotationConfig
from omniplane.spec.slo import HORIZON_MULTIPLIER

# the placeholder ladder of a policy that publishes no cap (throttle off): never read
NO_LADDER = Ladder(2, (1,), PartitionRule(1, 1))
_GROUPS: dict[str, type] = {"profiler": ProfilerConfig, "rotation": RotationConfig, "spatial": SpatialConfig}
_CONFIG_KEYS = {f.name: group for group, cls in _GROUPS.items() for f in fields(cls)}
_OTHER_KEYS = {"profiles", "calibration", "slo_multiplier", "default_slo_s"}
NO_SLO_DEFAULT_S = 60.0  # assumption: a class-less table's deadline, far above any first response
_PROFILE_KEYS = ("prefill_s_per_token", "step_s", "decode_s_per_token", "decode_tokens", "downstream_s")


def horizon_config(options: Mapping[str, Any], where: str = "policy_options") -> HorizonConfig:
    """The :class:`HorizonConfig` the flat option keys ask for (errors name the key)."""
    unknown = sorted(set(options) - set(_CONFIG_KEYS) - _OTHER_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown option(s) {unknown}; expected some of "
                         f"{sorted(set(_CONFIG_KEYS) | _OTHER_KEYS)}")
    groups: dict[str, dict[str, Any]] = {g: {} for g in _GROUPS}
    for key, value in options.items():
        if key in _CONFIG_KEYS:
            groups[_CONFIG_KEYS[key]][key] = value
    built: dict[str, Any] = {}
    for group, cls in _GROUPS.items():
        try:
            built[group] = cls(**groups[group])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
    return HorizonConfig(**built)


def _measured_profiles(options: Mapping[str, Any], where: str) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    path = options.get("calibration")
    if path is not None:
        try:
            doc = json.loads(Path(str(path)).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read the calibration: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("profiles"), dict):
            raise ValueError(f"{path}: profiles: expected a mapping of request class to profile")
        out.update(doc["profiles"])
        where = str(path)
    inline = options.get("profiles")
    if inline is not None:
        if not isinstance(inline, Mapping):
            raise ValueError(f"{where}: profiles: expected a mapping of request class to profile")
        out.update(inline)
    return out


def _profile(name: str, path: str, slo_s: float | None, measured: Mapping[str, Any] | None,
             multiplier: float, default_slo_s: float, where: str) -> ClassProfile:
    slo = default_slo_s if slo_s is None else float(slo_s)
    kind = PathClass(path)
    if measured is None:
        step = slo / multiplier
        return ClassProfile(name, kind, slo, 0.0, step, 0.0, 0.0, 0.0)
    if not isinstance(measured, Mapping):
        raise ValueError(f"{where}: profiles.{name}: expected a mapping with {list(_PROFILE_KEYS)}")
    values: list[float] = []
    for key in _PROFILE_KEYS:
        v = measured.get(key, 0.0)
        if not isinstance(v, int | float) or isinstance(v, bool) or not v >= 0.0:
            raise ValueError(f"{where}: profiles.{name}.{key}: expected a number >= 0, got {v!r}")
        values.append(float(v))
    return ClassProfile(name, kind, slo, *values)


def serving_profiles(classes: Mapping[str, tuple[PathClass, float | None]], options: Mapping[str, Any],
                     where: str = "policy_options") -> dict[str, ClassProfile]:
    """Class profiles from a class table ``{class: (path, SLO s or None)}`` and the options'
    measured ``profiles`` (module docstring)."""
    multiplier = float(options.get("slo_multiplier", HORIZON_MULTIPLIER))
    if not multiplier > 0.0:
        raise ValueError(f"{where}: slo_multiplier must be > 0, got {multiplier}")
    finite = [float(s) for _, s in classes.values() if s is not None and math.isfinite(s)]
    default = options.get("default_slo_s", max(finite) if finite else NO_SLO_DEFAULT_S)
    if isinstance(default, bool) or not isinstance(default, int | float) or not 0.0 < default < math.inf:
        raise ValueError(f"{where}: default_slo_s: expected a finite number of seconds > 0, got {default!r}")
    measured = _measured_profiles(options, where)
    unknown = sorted(set(measured) - set(classes))
    if unknown:
        raise ValueError(f"{where}: profiles for unknown class(es) {unknown}; classes are {sorted(classes)}")
    return {c: _profile(c, p, s, measured.get(c), multiplier, float(default), where)
            for c, (p, s) in classes.items()}


def policy_for_serving(name: str, classes: Mapping[str, tuple[PathClass, float | None]], total_sms: int,
                       ladder: Ladder | None, options: Mapping[str, Any], *,
                       where: str = "policy_options") -> tuple[Policy, Mode]:
    """``(policy, co-location mode)`` for a serving deployment, through the sched factory. The
    GPU backend realises the mode (green contexts for ``split``, MPS for ``mps``); without a
    ladder for this GPU no cap is published."""
    config = horizon_config(options, where)
    profiles = serving_profiles(classes, options, where)
    if ladder is not None and ladder.total_sms != total_sms:
        raise ValueError(f"{where}: the SM ladder is for {ladder.total_sms} SMs, the GPU has {total_sms}")
    if ladder is None and name in ATTRIBUTION:
        raise ValueError(f"{where}: policy {name!r} holds the shared stage at S_cap SMs and needs an SM "
                         f"ladder (settings total_sms and ladder.s_max or ladder.levels)")
    if name == "static-cap":
        raise ValueError(f"{where}: policy 'static-cap' needs a fixed-SM sweep to choose its cap (the "
                         f"one-sided capacity curve); serving has none: use static-split, whose cap is S_cap")
    if ladder is None and config.spatial.throttle:
        config = HorizonConfig(config.profiler, config.rotation,
                               replace(config.spatial, throttle=False))
    return make_policy(name, profiles, ladder or NO_LADDER, config)
