"""omniplane's scheduler classes for vLLM-Omni's stages (imports vLLM-Omni; docs/reference/vllm.md).

vLLM-Omni 0.30 takes a stage's scheduler class from the pipeline topology, so these are named
by omniplane's registered pipeline variants (:mod:`omniplane.vllm.omni_pipelines`), which the
deploy files omniplane writes select with ``pipeline: omniplane_<model_type>``.
"""

from __future__ import annotations

from vllm_omni.core.sched.omni_ar_scheduler import OmniARAsyncScheduler, OmniARScheduler
from vllm_omni.core.sched.omni_generation_scheduler import OmniGenerationScheduler

from omniplane.vllm.mixin import PolicySchedulerMixin


class OmniplaneOmniARScheduler(PolicySchedulerMixin, OmniARScheduler):  # type: ignore[misc]
    """vLLM-Omni's ``OmniARScheduler`` (thinker / talker: KV hand-over to the next stage, omni
    outputs) with an omniplane policy around each ``schedule()``."""


class OmniplaneOmniARAsyncScheduler(PolicySchedulerMixin, OmniARAsyncScheduler):  # type: ignore[misc]
    """The same on vLLM-Omni's ``OmniARAsyncScheduler`` (``async_scheduling: true``)."""


class OmniplaneOmniGenerationScheduler(PolicySchedulerMixin, OmniGenerationScheduler):  # type: ignore[misc]
    """vLLM-Omni's ``OmniGenerationScheduler`` (code2wav) publishing its activity as a downstream
    stage (role ``downstream``; its policy is normally ``fcfs``)."""
