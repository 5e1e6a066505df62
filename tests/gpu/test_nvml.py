"""The NVML memory-pressure sampler against a fake NVML: GPM DRAM bandwidth with the 100 ms
minimum between samples, memory utilisation otherwise, and a clear refusal without a GPU."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from omniplane.gpu import GpuUnavailable
from omniplane.gpu.backends import make_sampler
from omniplane.gpu.nvml import NullSampler, NvmlSampler


class NVMLError(Exception):
    pass


def fake_nvml(*, gpm: bool, values: list[float], init_ok: bool = True) -> Any:
    state = {"samples": 0, "metric_ids": [], "values": list(values)}

    class Metric:
        def __init__(self) -> None:
            self.metricId, self.value = 0, 0.0

    class MetricsGet:
        def __init__(self) -> None:
            self.version = self.numMetrics = 0
            self.sample1 = self.sample2 = None
            self.metrics = [Metric()]

    def init() -> None:
        if not init_ok:
            raise NVMLError("Driver Not Loaded")

    def metrics_get(mg: MetricsGet) -> None:
        assert mg.version == 7 and mg.numMetrics == 1 and mg.sample1 is not mg.sample2
        state["metric_ids"].append(mg.metrics[0].metricId)
        mg.metrics[0].value = state["values"].pop(0)

    def sample_get(h: Any, s: Any) -> None:
        state["samples"] += 1

    return SimpleNamespace(
        NVMLError=NVMLError,
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: "h",
        nvmlGpmQueryDeviceSupport=lambda h: SimpleNamespace(isSupportedDevice=int(gpm)),
        nvmlGpmSampleAlloc=object,
        nvmlGpmSampleFree=lambda s: None,
        nvmlGpmSampleGet=sample_get,
        c_nvmlGpmMetricsGet_t=MetricsGet,
        NVML_GPM_METRICS_GET_VERSION=7,
        NVML_GPM_METRIC_DRAM_BW_UTIL=10,
        nvmlGpmMetricsGet=metrics_get,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(memory=state["values"].pop(0)),
        state=state,
    )


def test_gpm_never_measures_over_less_than_100_ms() -> None:
    nv = fake_nvml(gpm=True, values=[55.0, 80.0])
    s = NvmlSampler(min_interval_s=0.01, now=0.0, nvml=nv)
    assert s.source == "nvml-gpm-dram-bw" and s.interval == pytest.approx(0.1)
    assert s.sample(0.05) is None  # too soon after the first GPM sample
    assert s.sample(0.12) == pytest.approx(0.55)
    assert s.sample(0.2) == pytest.approx(0.55)  # 80 ms after the last one: cached
    assert s.sample(0.23) == pytest.approx(0.80)
    assert nv.state["metric_ids"] == [10, 10] and nv.state["samples"] == 3
    s.close()


def test_memory_utilisation_without_gpm() -> None:
    nv = fake_nvml(gpm=False, values=[30.0, 140.0])
    s = NvmlSampler(min_interval_s=0.0, nvml=nv)
    assert s.source == "nvml-memory-util"
    assert s.sample(0.0) == pytest.approx(0.30)
    assert s.sample(0.001) == pytest.approx(1.0)  # clamped


def test_no_driver_is_reported_not_hidden() -> None:
    with pytest.raises(GpuUnavailable, match="no NVIDIA driver"):
        NvmlSampler(nvml=fake_nvml(gpm=False, values=[], init_ok=False))
    null = NullSampler("why")
    assert null.sample(1.0) is None and null.reason == "why"


def test_auto_sampler_on_this_machine() -> None:
    s = make_sampler("auto", device=0, min_interval_s=0.1)
    if s.source != "null":
        pytest.skip("NVML works here")
    assert isinstance(s, NullSampler) and s.reason.startswith("no GPU:")
    with pytest.raises(ValueError, match="expected one of"):
        make_sampler("dcgm", device=0, min_interval_s=0.1)
