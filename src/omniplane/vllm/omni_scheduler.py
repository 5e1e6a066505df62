"""omniplane's scheduler class for vLLM-Omni's autoregressive stages: ``scheduler_cls:
omniplane.vllm.omni_scheduler.OmniplaneOmniARScheduler`` in a stage config (imports
vLLM-Omni; docs/vllm.md)."""

from __future__ import annotations

from vllm_omni.core.sched.omni_ar_scheduler import OmniARScheduler
from vllm_omni.core.sched.omni_generation_scheduler import OmniGenerationScheduler

from omniplane.vllm.mixin import PolicySchedulerMixin


class OmniplaneOmniARScheduler(PolicySchedulerMixin, OmniARScheduler):  # type: ignore[misc]
    """vLLM-Omni's ``OmniARScheduler`` (KV hand-over to the next stage, omni outputs) with an
    omniplane policy around each ``schedule()``."""


class OmniplaneOmniGenerationScheduler(PolicySchedulerMixin, OmniGenerationScheduler):  # type: ignore[misc]
    """vLLM-Omni's ``OmniGenerationScheduler`` (code2wav) publishing its activity as a downstream
    stage (role ``downstream``; its policy is normally ``fcfs``)."""
