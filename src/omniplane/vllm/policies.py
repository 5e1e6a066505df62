"""The one place a policy name becomes a policy object for the vLLM scheduler.

Names:

- ``fcfs``: :class:`omniplane.sim.policy.FCFS` (nothing hidden, no cap): vLLM's own behaviour.
- ``horizon``: HorizonServe (issue 7, ``omniplane.sched``). Registered below once that package
  lands; until then asking for it fails with a message saying so.
- ``import:MODULE:NAME``: any callable ``NAME(inputs: PolicyInputs) -> Policy`` (a class or a
  factory function), for user policies and tests, without a registry filled by imports.

Every policy gets the same :class:`PolicyInputs`: the class table (path and SLO per class),
the GPU's SM count, the SM ladder and the free-form ``policy_options`` of the settings.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from omniplane.sim.policy import FCFS, Policy
from omniplane.vllm.settings import SchedulerSettings

POLICIES: tuple[str, ...] = ("fcfs", "horizon")


class PolicyUnavailable(RuntimeError):
    """The named policy exists in omniplane's design but is not installed here."""


@dataclass(frozen=True)
class PolicyInputs:
    """What a policy may be configured from inside vLLM."""

    classes: dict[str, tuple[str, float | None]]  # class -> (path "short"/"long", SLO seconds or None)
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
        # ---- issue 7: register HorizonServe here -----------------------------------------
        # When omniplane.sched lands, construct its policy from `inputs` (class paths and SLOs,
        # total_sms, ladder = S_min..S_cap, options = u_guard, N range, gamma, ...) and return it.
        raise PolicyUnavailable(
            "policy 'horizon' (HorizonServe, omniplane.sched) is not installed in this "
            "build yet: use 'fcfs', or 'import:MODULE:NAME' for a policy of your own"
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
