"""GPU controls for the HorizonServe spatial controller: memory-pressure sampling (NVML),
SM ladders of CUDA green contexts, MPS for the baselines, and a null backend for machines
without a GPU.

Nothing here imports torch, cuda-bindings or nvidia-ml-py at import time: each backend imports
its library when it is constructed and raises :class:`GpuUnavailable`, saying what is missing,
when there is no GPU, driver or library. The null backends never pretend to control anything:
they report ``backend == "null"`` and the reason. The ladder the green contexts realise is
built by :func:`omniplane.sched.ladder.build_ladder`, the same builder the offline calibration
uses, so the simulated and the deployed policy cap on the same SM levels.
"""

from omniplane.gpu.errors import GpuUnavailable

__all__ = ["GpuUnavailable"]
