"""omniplane's worker classes for vLLM-Omni stages: ``worker_cls:
omniplane.vllm.omni_worker.OmniplaneARWorker`` (autoregressive stages, e.g. the thinker and the
talker) or ``OmniplaneGenerationWorker`` (code2wav). Set ``worker_cls`` explicitly: vLLM-Omni
only derives it from ``worker_type`` when ``worker_cls`` is absent (imports vLLM-Omni)."""

from __future__ import annotations

from vllm_omni.worker.gpu_ar_worker import GPUARWorker
from vllm_omni.worker.gpu_generation_worker import GPUGenerationWorker

from omniplane.vllm.worker_mixin import SmCapWorkerMixin


class OmniplaneARWorker(SmCapWorkerMixin, GPUARWorker):  # type: ignore[misc]
    """vLLM-Omni's AR worker with the SM cap applied before each forward pass."""


class OmniplaneGenerationWorker(SmCapWorkerMixin, GPUGenerationWorker):  # type: ignore[misc]
    """vLLM-Omni's generation worker with the SM cap applied before each forward pass."""
