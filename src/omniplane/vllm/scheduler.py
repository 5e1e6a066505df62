"""omniplane's scheduler classes for vLLM v1: ``--scheduler-cls
omniplane.vllm.scheduler.OmniplaneScheduler``, or ``...OmniplaneAsyncScheduler`` with
``--async-scheduling`` (imports vLLM; docs/reference/vllm.md)."""

from __future__ import annotations

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

from omniplane.vllm.mixin import PolicySchedulerMixin


class OmniplaneScheduler(PolicySchedulerMixin, Scheduler):  # type: ignore[misc]
    """vLLM's ``Scheduler`` with an omniplane policy choosing each step's visible requests and
    SM cap (:class:`~omniplane.vllm.mixin.PolicySchedulerMixin`)."""


class OmniplaneAsyncScheduler(PolicySchedulerMixin, AsyncScheduler):  # type: ignore[misc]
    """The same on vLLM's ``AsyncScheduler`` (``--async-scheduling``: the next step is scheduled
    while the current one runs; vLLM falls back to synchronous scheduling for a custom class
    that is not an ``AsyncScheduler``)."""
