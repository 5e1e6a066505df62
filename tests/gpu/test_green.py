"""Green-context ladders: the null backend, the cuda-bindings backend against a fake driver
(the call sequence and the complementary partitions), the torch backend's refusals, and the
factory on this machine (no GPU: it must say so)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from omniplane.gpu import GpuUnavailable
from omniplane.gpu.backends import make_streams
from omniplane.gpu.green import CudaStreams, NullStreams, TorchStreams
from omniplane.sched.ladder import LadderSpec, partition_rule


def test_null_streams_apply_nothing_and_say_why() -> None:
    s = NullStreams(132, partition_rule(9, 0), role="downstream", reason="no GPU here")
    assert s.stream(3) is None and s.stream(None) is None
    assert (
        s.granted[0] == 124 and s.describe()["applied"] is False and s.describe()["reason"] == "no GPU here"
    )
    with pytest.raises(ValueError, match="role"):
        NullStreams(132, partition_rule(9, 0), role="both")


class FakeDriver:
    """The subset of cuda.bindings.driver the backend calls; SMs granted in multiples of 8."""

    def __init__(self, total: int = 132, ok: bool = True, devices: int = 1, report_rule: bool = True) -> None:
        self.total, self.ok, self.devices, self.report_rule = total, ok, devices, report_rule
        self.calls: list[str] = []
        self.CUdevResourceType = SimpleNamespace(CU_DEV_RESOURCE_TYPE_SM="SM")
        self.CUgreenCtxCreate_flags = SimpleNamespace(CU_GREEN_CTX_DEFAULT_STREAM=1)
        self.CUstream_flags = SimpleNamespace(CU_STREAM_NON_BLOCKING=1)
        self.CUdevice_attribute = SimpleNamespace(
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="maj",
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="min",
        )

    def _res(self, n: int) -> Any:
        sm = SimpleNamespace(smCount=n)
        if self.report_rule:
            sm.minSmPartitionSize, sm.smCoscheduledAlignment = 8, 8
        return SimpleNamespace(sm=sm)

    def cuInit(self, flags: int) -> tuple[int]:
        self.calls.append("init")
        return (0 if self.ok else 100,)

    def cuGetErrorName(self, err: int) -> tuple[int, str]:
        return 0, "CUDA_ERROR_NO_DEVICE"

    def cuDeviceGetCount(self) -> tuple[int, int]:
        return 0, self.devices

    def cuDeviceGet(self, i: int) -> tuple[int, int]:
        return 0, i

    def cuDeviceGetAttribute(self, attr: str, dev: int) -> tuple[int, int]:
        return 0, 9 if attr == "maj" else 0

    def cuDeviceGetDevResource(self, dev: int, kind: str) -> tuple[int, Any]:
        return 0, self._res(self.total)

    def cuDevSmResourceSplitByCount(self, n: int, res: Any, flags: int, min_count: int) -> tuple[Any, ...]:
        got = -(-min_count // 8) * 8
        self.calls.append(f"split{min_count}")
        return 0, [self._res(got)], 1, self._res(res.sm.smCount - got)

    def cuDevResourceGenerateDesc(self, parts: list[Any], n: int) -> tuple[int, Any]:
        return 0, ("desc", parts[0].sm.smCount)

    def cuGreenCtxCreate(self, desc: Any, dev: int, flags: int) -> tuple[int, Any]:
        return 0, ("ctx", desc[1])

    def cuGreenCtxStreamCreate(self, ctx: Any, flags: int, prio: int) -> tuple[int, Any]:
        self.calls.append(f"stream{ctx[1]}")
        return 0, ("stream", ctx[1])

    # the context a stream's work runs in, and a green context's context: equal unless a test
    # makes a stream land elsewhere (``wrong_ctx``: SM counts whose streams run in the primary
    # context, e.g. only on some threads via ``wrong_on``)
    wrong_ctx: tuple[int, ...] = ()
    wrong_on: Any = None  # a thread ident, or None: every thread

    def cuStreamGetCtx(self, stream: Any) -> tuple[int, Any]:
        import threading

        wrong = stream[1] in self.wrong_ctx and self.wrong_on in (None, threading.get_ident())
        return 0, ("primary",) if wrong else ("green-ctx", stream[1])

    def cuCtxFromGreenCtx(self, ctx: Any) -> tuple[int, Any]:
        return 0, ("green-ctx", ctx[1])


def wrap(raw: Any, device: int) -> Any:
    return raw


def test_cuda_streams_build_one_stream_per_level_with_complementary_partitions() -> None:
    spec = LadderSpec(levels=(32, 64, 96))
    shared = CudaStreams(spec, role="shared", driver=FakeDriver(), wrap=wrap)
    down = CudaStreams(spec, role="downstream", driver=FakeDriver(), wrap=wrap)
    assert shared.granted == (32, 64, 96) and down.granted == (100, 68, 36)
    assert all(a + b == 132 for a, b in zip(shared.granted, down.granted, strict=True))
    assert (
        shared.stream(1) == ("stream", 64)
        and down.stream(1) == ("stream", 68)
        and shared.stream(None) is None
    )
    assert shared.read_back and shared.ladder.rule.source.startswith("measured:")
    d = down.describe()
    assert (d["backend"], d["role"], d["applied"], d["granted"], d["read_back"]) == (
        "cuda-bindings", "downstream", True, [100, 68, 36], True
    ) and "caveat" not in d


def test_cuda_streams_fall_back_to_the_documented_rule_and_refuse_without_a_gpu() -> None:
    s = CudaStreams(None, driver=FakeDriver(report_rule=False), wrap=wrap)
    assert s.ladder.rule.align == 8 and "GREEN__CONTEXTS" in s.ladder.rule.source
    with pytest.raises(GpuUnavailable, match="no usable CUDA driver"):
        CudaStreams(None, driver=FakeDriver(ok=False), wrap=wrap)
    with pytest.raises(GpuUnavailable, match="0 CUDA device"):
        CudaStreams(None, driver=FakeDriver(devices=0), wrap=wrap)


def test_torch_streams_refuse_without_cuda_or_green_contexts() -> None:
    no_cuda = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: False))
    with pytest.raises(GpuUnavailable, match="no CUDA device"):
        TorchStreams(None, torch_module=no_cuda)
    no_green = SimpleNamespace(
        cuda=SimpleNamespace(is_available=lambda: True, green_contexts=SimpleNamespace(SUPPORTED=False))
    )
    with pytest.raises(GpuUnavailable, match="green-context"):
        TorchStreams(None, torch_module=no_green)


def test_torch_streams_flag_counts_they_cannot_read_back() -> None:
    made: list[int] = []

    class Ctx:
        def __init__(self, n: int) -> None:
            made.append(n)

        def Stream(self) -> str:
            return f"s{made[-1]}"

    gc = SimpleNamespace(
        SUPPORTED=True, GreenContext=SimpleNamespace(create=lambda num_sms, device_id: Ctx(num_sms))
    )
    props = SimpleNamespace(multi_processor_count=132, major=9, minor=0)
    fake = SimpleNamespace(
        cuda=SimpleNamespace(
            is_available=lambda: True, green_contexts=gc, get_device_properties=lambda d: props
        )
    )
    s = TorchStreams(LadderSpec(levels=(64,)), role="downstream", torch_module=fake)
    assert made == [64] and s.read_back is False and s.stream(0) == "s64"
    d = s.describe()
    assert d["backend"] == "torch" and d["granted"] == [64] and d["read_back"] is False
    assert d["caveat"].startswith("downstream partitions may overlap")


def test_auto_on_this_machine_is_null_with_the_reasons() -> None:
    s = make_streams("auto", None, role="shared", device=0, total_sms=132, rule=partition_rule(9, 0))
    if s.backend != "null":
        pytest.skip(f"a GPU backend is available here ({s.backend})")
    assert s.describe()["reason"].startswith("no GPU:")
    with pytest.raises(ValueError, match="expected one of"):
        make_streams("magic", None, role="shared", device=0, total_sms=132, rule=partition_rule(9, 0))
