"""omniplane's worker class for vLLM on GPUs: ``--worker-cls omniplane.vllm.worker.OmniplaneWorker``
(imports vLLM; docs/reference/vllm.md)."""

from __future__ import annotations

from vllm.v1.worker.gpu_worker import Worker

from omniplane.vllm.worker_mixin import SmCapWorkerMixin


class OmniplaneWorker(SmCapWorkerMixin, Worker):  # type: ignore[misc]
    """vLLM's GPU ``Worker`` running each forward pass on the SM level the scheduler chose."""
