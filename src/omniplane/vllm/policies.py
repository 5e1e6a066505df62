"""The one place a policy name becomes a policy object for the vLLM scheduler.

Names:

- ``fcfs``: :class:`omniplane.policy.FCFS` (nothing hidden, no cap): vLLM's own behaviour.
- ``horizon``: HorizonServe (``omniplane.sched``, built by
  :func:`omniplane.sched.serving.horizon_for_serving` through the sched factory, imported only
  when asked for): the class table's paths and SLOs, the GPU's SM count and the ladder; its
  ``policy_options`` are HorizonServe's parameters and measured class profiles (that module's
  docstring and docs/vllm.md).
- ``import:MODULE:NAME``: any callable ``NAME(inputs: PolicyInputs) -> Policy`` (a class or a
  factory function), for user policies and tests, without a registry filled by imports.

Every policy gets the same :class:`PolicyInputs`: the class table (path and SLO per class),
the GPU's SM count, the SM ladder and the free-form ``policy_options`` of the settings.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from omniplane.policy import FCFS, PathClass, Policy
from omniplane.vllm.settings import SchedulerSettings

POLICIES: tuple[str, ...] = ("fcfs", "horizon")


@dataclass(frozen=True)
class PolicyInputs:
    """What a policy may be configured from inside vLLM."""

    classes: dict[str, tuple[PathClass, float | None]]  # class -> (path, SLO seconds or None)
    total_sms: int
    ladder: tuple[int, ...]  # the shared stage's SM levels, ascending (empty: no SM control)
    options: dict[str, Any] = field(default_factory=dict)
    slo_source: str = ""

    @classmethod
    def from_settings(cls, s: SchedulerSettings, ladder: tuple[int, ...] = ()) -> PolicyInputs:
        return cls(
            {n: (c.path, c.slo_s) for n, c in s.classes.items()},
            s.total_sms,
            ladder,
            dict(s.policy_options),
            s.slo_source,
        )


def make_policy(name: str, inputs: PolicyInputs) -> Policy:
    if name == "fcfs":
        return FCFS()
    if name == "horizon":
        from omniplane.sched.serving import horizon_for_serving

        return horizon_for_serving(
            inputs.classes, inputs.total_sms, inputs.ladder, inputs.options, source=inputs.slo_source
        )
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
    raise ValueError(f"unknown policy {name!r}: expected one of {POLICIES} or 'import:MODULE:NAME'")
