"""omniplane: a control plane for serving omni / any-to-any multimodal models.

Layers (each imports only from the layers above it; the full order, checked import by import,
is ``LAYERS`` in tests/test_layering.py): ``spec`` -> ``perf`` / ``workload`` -> ``sim`` /
``sched`` -> ``plan`` -> integrations (``gpu``, ``vllm``, ``deploy``) -> ``fidelity`` ->
``repro`` (the papers' experiments) -> ``cli``. The core layers never import torch, CUDA, vLLM or
Ray.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("omniplane")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
