"""Memory-pressure samplers: the signal HorizonServe's spatial controller smooths (section 4.4).

:class:`NvmlSampler` reads, through nvidia-ml-py:

- on GPUs with GPM (Hopper and newer): ``NVML_GPM_METRIC_DRAM_BW_UTIL``, DRAM bandwidth used
  over the theoretical maximum, between two GPM samples. NVML's documentation asks for the two
  samples to be more than 100 ms apart (internal refresh rate): the sampler never computes a
  metric over a shorter interval, and returns the previous value (None before the first one)
  when asked sooner (https://docs.nvidia.com/deploy/nvml-api/group__nvmlGpmFunctions.html).
- otherwise: ``nvmlDeviceGetUtilizationRates().memory``, the percentage of time device memory
  was read or written over NVML's own sample period (1/6 s to 1 s depending on the product,
  https://docs.nvidia.com/deploy/nvml-api/structnvmlUtilization__t.html), rate-limited to
  ``min_interval_s``.

Values are fractions in [0, 1]. :class:`NullSampler` is the no-GPU sampler: it returns None
(no signal) and says why.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from omniplane.gpu.errors import GpuUnavailable

GPM_MIN_INTERVAL_S = 0.1  # https://docs.nvidia.com/deploy/nvml-api/group__nvmlGpmFunctions.html


class PressureSampler(Protocol):
    source: str

    def sample(self, now: float) -> float | None:
        """The memory-pressure fraction at monotonic time ``now`` (None: no signal yet)."""

    def close(self) -> None: ...


class NullSampler:
    """No GPU: no signal."""

    source = "null"

    def __init__(self, reason: str = "no GPU sampler requested") -> None:
        self.reason = reason

    def sample(self, now: float) -> float | None:
        return None

    def close(self) -> None:
        return None


class NvmlSampler:
    """NVML memory pressure of one device (GPM DRAM bandwidth where supported)."""

    def __init__(
        self,
        device: int = 0,
        *,
        min_interval_s: float = 0.1,
        prefer_gpm: bool = True,
        now: float = 0.0,
        nvml: Any = None,
    ) -> None:
        if min_interval_s < 0:
            raise ValueError(f"min_interval_s must be >= 0, got {min_interval_s}")
        nv = nvml if nvml is not None else self._import()
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise GpuUnavailable(f"NVML: cannot initialise ({exc}): no NVIDIA driver or GPU") from None
        self._nv = nv
        try:
            self._handle = nv.nvmlDeviceGetHandleByIndex(device)
        except nv.NVMLError as exc:
            nv.nvmlShutdown()
            raise GpuUnavailable(f"NVML: no device {device} ({exc})") from None
        self.device = device
        self.gpm = prefer_gpm and self._gpm_supported()
        self.interval = max(min_interval_s, GPM_MIN_INTERVAL_S) if self.gpm else min_interval_s
        self.source = "nvml-gpm-dram-bw" if self.gpm else "nvml-memory-util"
        self._value: float | None = None
        self._t = now  # time of the last metric (GPM: of the first sample)
        if self.gpm:
            self._s1, self._s2 = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(self._handle, self._s1)

    @staticmethod
    def _import() -> Any:
        try:
            return importlib.import_module("pynvml")
        except ImportError:
            raise GpuUnavailable("nvidia-ml-py is not installed (pip install 'omniplane[gpu]')") from None

    def _gpm_supported(self) -> bool:
        fn = getattr(self._nv, "nvmlGpmQueryDeviceSupport", None)
        if fn is None:
            return False
        try:
            return bool(fn(self._handle).isSupportedDevice)
        except self._nv.NVMLError:
            return False

    def sample(self, now: float) -> float | None:
        if now - self._t < self.interval and (self._value is not None or self.gpm):
            return self._value
        nv = self._nv
        if self.gpm:
            nv.nvmlGpmSampleGet(self._handle, self._s2)
            mg = nv.c_nvmlGpmMetricsGet_t()
            mg.version = nv.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = 1
            mg.sample1, mg.sample2 = self._s1, self._s2
            mg.metrics[0].metricId = nv.NVML_GPM_METRIC_DRAM_BW_UTIL
            nv.nvmlGpmMetricsGet(mg)
            pct = float(mg.metrics[0].value)
            self._s1, self._s2 = self._s2, self._s1
        else:
            pct = float(nv.nvmlDeviceGetUtilizationRates(self._handle).memory)
        self._value = min(1.0, max(0.0, pct / 100.0))
        self._t = now
        return self._value

    def close(self) -> None:
        if self.gpm:
            self._nv.nvmlGpmSampleFree(self._s1)
            self._nv.nvmlGpmSampleFree(self._s2)
            self.gpm = False
        self._nv.nvmlShutdown()
