"""The worker classes against vLLM's real worker: the methods the extension wraps exist with
the signatures it assumes (catches API drift between vLLM versions)."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

from vllm.v1.worker.gpu_worker import Worker  # noqa: E402

from omniplane.vllm.worker import OmniplaneWorker  # noqa: E402
from omniplane.vllm.worker_mixin import SmCapWorkerMixin  # noqa: E402


def test_the_extension_wraps_vllms_forward_pass() -> None:
    assert OmniplaneWorker.__mro__[1:3] == (SmCapWorkerMixin, Worker)
    for name in ("init_device", "execute_model", "sample_tokens"):
        assert getattr(OmniplaneWorker, name) is getattr(SmCapWorkerMixin, name)
        assert callable(getattr(Worker, name))
    assert list(inspect.signature(Worker.execute_model).parameters) == ["self", "scheduler_output"]
    assert list(inspect.signature(Worker.sample_tokens).parameters) == ["self", "grammar_output"]
