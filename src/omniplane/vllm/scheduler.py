"""omniplane's scheduler class for vLLM v1: ``--scheduler-cls
omniplane.vllm.scheduler.OmniplaneScheduler`` (imports vLLM; docs/vllm.md)."""

from __future__ import annotations

from vllm.v1.core.sched.scheduler import Scheduler

from omniplane.vllm.mixin import PolicySchedulerMixin


class OmniplaneScheduler(PolicySchedulerMixin, Scheduler):  # type: ignore[misc]
    """vLLM's ``Scheduler`` with an omniplane policy choosing each step's visible requests and
    SM cap (:class:`~omniplane.vllm.mixin.PolicySchedulerMixin`)."""
