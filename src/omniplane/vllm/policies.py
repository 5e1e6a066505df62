"""How the vLLM scheduler gets its policy object from a name in its settings.

- Every name of the one factory, :mod:`omniplane.sched.factory` (``vanilla`` with its alias
  ``fcfs``, ``edf``, ``mps``, ``edf-mps``, ``horizon``, ``no-rotation``, ``no-sm-throttle``),
  built by :func:`omniplane.sched.serving.policy_for_serving` from the class table's paths and
  SLOs, the GPU's SM count and the ladder; ``policy_options`` are HorizonServe's parameters and
  measured class profiles (that module's docstring and docs/reference/vllm.md). The simulator builds the
  same objects through the same factory. The co-location mode a name implies (MPS for ``mps``,
  ``edf-mps`` and ``no-sm-throttle``) is the deployment's to provide; it is logged.
- ``import:MODULE:NAME``: any callable ``NAME(inputs: PolicyInputs) -> Policy`` (a class or a
  factory function), for user policies and tests, without a registry filled by imports.

Every policy gets the same :class:`PolicyInputs`: the class table (path and SLO per class),
the GPU's SM count, the SM ladder and the free-form ``policy_options`` of the settings.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from typing import Any

from omniplane.policy import PathClass, Policy
from omniplane.sched.factory import ALIASES, POLICIES, SIMULATOR_ONLY
from omniplane.sched.ladder import Ladder
from omniplane.vllm.settings import SchedulerSettings

log = logging.getLogger(__name__)
# static-cap's cap comes from a fixed-SM sweep that serving does not have (sched.serving)
NAMES: tuple[str, ...] = (*(p for p in POLICIES if p not in SIMULATOR_ONLY), *ALIASES)


@dataclass(frozen=True)
class PolicyInputs:
    """What a policy may be configured from inside vLLM."""

    classes: dict[str, tuple[PathClass, float | None]]  # class -> (path, SLO seconds or None)
    total_sms: int
    ladder: Ladder | None  # the shared stage's SM ladder (None: no SM control)
    options: dict[str, Any] = field(default_factory=dict)
    slo_source: str = ""

    @classmethod
    def from_settings(cls, s: SchedulerSettings, ladder: Ladder | None = None) -> PolicyInputs:
        return cls(
            {n: (c.path, c.slo_s) for n, c in s.classes.items()},
            s.total_sms,
            ladder,
            dict(s.policy_options),
            s.slo_source,
        )


def scheduler_policy(name: str, inputs: PolicyInputs) -> Policy:
    """The policy ``name`` (a factory name or ``import:MODULE:NAME``) asks for."""
    if name.startswith("import:"):
        _, _, ref = name.partition(":")
        module, sep, attr = ref.rpartition(":")
        if not sep or not module or not attr:
            raise ValueError(f"policy {name!r}: expected 'import:MODULE:NAME'")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"policy {name!r}: cannot load {module}:{attr} ({exc})") from None
        policy: Policy = factory(inputs)
        return policy
    if name not in NAMES:
        raise ValueError(f"unknown policy {name!r}: expected one of {NAMES} or 'import:MODULE:NAME'")
    from omniplane.sched.serving import policy_for_serving

    built, mode = policy_for_serving(name, inputs.classes, inputs.total_sms, inputs.ladder, inputs.options)
    log.info("omniplane policy %s: co-location mode %s (SLO table: %s)", name, mode, inputs.slo_source or "-")
    return built
