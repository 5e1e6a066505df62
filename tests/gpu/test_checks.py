"""Fail closed (omniplane.gpu.checks) on the fake driver: every failed check means no SM caps,
the reason in one warning line and in the exposed state; every passed check is per thread."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from omniplane.gpu.backends import make_sampler
from omniplane.gpu.checks import CheckFailed, ThrottleState, check_signal, verify_levels
from omniplane.gpu.green import CudaStreams, NullStreams
from omniplane.gpu.nvml import NullSampler
from omniplane.sched.ladder import LadderSpec, partition_rule
from omniplane.vllm.applier import SmApplier
from omniplane.vllm.settings import SchedulerSettings
from tests.gpu.test_green import FakeDriver, wrap

LEVELS = LadderSpec(levels=(32, 64, 96))


class Probe:
    """A matmul probe that records (thread, level) and fails at ``bad`` levels."""

    def __init__(self, bad: tuple[int, ...] = ()) -> None:
        self.bad, self.calls = bad, []  # type: ignore[var-annotated]

    def __call__(self, stream: Any, level: int, device: int) -> None:
        self.calls.append((threading.get_ident(), level))
        if level in self.bad:
            raise CheckFailed(f"BF16 matmul at level {level}", "max error 0.5 of the result's scale")


class Recorder:
    """A control record stand-in that always publishes a 64-SM cap."""

    path = "fake"

    def read(self, slot: int) -> Any:
        from omniplane.control import SlotState

        return SlotState(pid=1, sm_count=64, sm_level=1)

    def close(self) -> None:
        return None


def applier(driver: FakeDriver, probe: Probe) -> SmApplier:
    streams = CudaStreams(LEVELS, driver=driver, wrap=wrap)
    return SmApplier(streams, Recorder(), probe=probe)  # type: ignore[arg-type]


def test_all_checks_pass_on_every_launching_thread_once() -> None:
    probe = Probe()
    a = applier(FakeDriver(), probe)
    assert a.verify_thread() and a.verify_thread()  # the second call checks nothing again
    assert [lv for _, lv in probe.calls] == [0, 1, 2]
    other = threading.Thread(target=a.verify_thread, name="vllm-output")
    other.start(), other.join()
    assert len(probe.calls) == 6 and len({t for t, _ in probe.calls}) == 2  # each thread checked
    assert a.throttle.enabled and a.throttle.disabled_total == 0 and len(a.throttle.passed) == 2


def test_a_level_whose_stream_runs_outside_its_green_context_disables_throttling(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver = FakeDriver()
    driver.wrong_ctx = (64,)
    a = applier(driver, Probe())
    seen: list[Any] = []
    with caplog.at_level(logging.WARNING, "omniplane.gpu"):
        a.run(lambda: seen.append("ran"))
    assert seen == ["ran"] and a.throttle.enabled is False and a.throttle.check == "SM level 1 context"
    assert a.throttle.disabled_total == 1 and a.describe()["throttle"]["enabled"] is False
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "SM throttling disabled: SM level 1 context" in lines[0]
    assert "temporal scheduler goes on" in lines[0]


def test_a_thread_where_the_level_context_is_not_current_disables_throttling(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """vLLM launches a step's kernels from more than one thread: a check that passes on the
    first thread and fails on the second turns throttling off before the second applies a cap."""
    driver = FakeDriver()
    a = applier(driver, Probe())
    assert a.verify_thread()
    done: list[bool] = []

    def second() -> None:
        driver.wrong_ctx, driver.wrong_on = (32,), threading.get_ident()
        done.append(a.verify_thread())

    with caplog.at_level(logging.WARNING, "omniplane.gpu"):
        t = threading.Thread(target=second, name="vllm-sampler")
        t.start(), t.join()
    assert done == [False] and not a.throttle.enabled and "thread vllm-sampler" in a.throttle.reason
    assert a.verify_thread() is False  # off for every thread from now on
    assert "SM level 0 context" in caplog.text


def test_a_wrong_matmul_at_any_level_disables_throttling(caplog: pytest.LogCaptureFixture) -> None:
    a = applier(FakeDriver(), Probe(bad=(2,)))
    with caplog.at_level(logging.WARNING, "omniplane.gpu"):
        assert a.run(lambda x: x + 1, 1) == 2
    assert not a.throttle.enabled and a.throttle.check == "BF16 matmul at level 2"
    assert "max error 0.5" in caplog.text


def test_a_driver_error_in_a_check_is_a_failed_check_not_a_crash() -> None:
    driver = FakeDriver()
    driver.cuStreamGetCtx = lambda stream: (201,)  # type: ignore[method-assign]
    a = applier(driver, Probe())
    assert a.verify_thread() is False and "cuStreamGetCtx failed" in a.throttle.reason


def test_the_null_backend_never_passes() -> None:
    streams = NullStreams(132, partition_rule(9, 0), LEVELS, reason="no GPU: none here")
    with pytest.raises(CheckFailed, match="no GPU: none here"):
        verify_levels(streams, Probe(), 0)


class Sampler:
    source = "nvml-gpm-dram-bw"
    interval = 0.1

    def __init__(self, *values: Any) -> None:
        self.values = list(values)

    def sample(self, now: float) -> float | None:
        v = self.values.pop(0)
        if isinstance(v, Exception):
            raise v
        return v  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("sampler", "match"),
    [
        (NullSampler("no GPU: NVML: cannot initialise"), "no GPU: NVML"),
        (Sampler(None, None), "read None"),
        (Sampler(RuntimeError("NVML_ERROR_GPU_IS_LOST")), "GPU_IS_LOST"),
        (Sampler(float("nan")), "not a fraction"),
        (Sampler(1.7), "not a fraction"),
    ],
)
def test_a_memory_signal_that_does_not_read_fails_the_check(sampler: Any, match: str) -> None:
    with pytest.raises(CheckFailed, match=match):
        check_signal(sampler, sleep=lambda s: None)


def test_a_signal_that_reads_after_one_interval_passes() -> None:
    waited: list[float] = []
    assert check_signal(Sampler(None, 0.42), sleep=waited.append) == 0.42 and waited == [0.1]


def test_throttle_state_counts_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    st = ThrottleState()
    with caplog.at_level(logging.WARNING, "omniplane.gpu"):
        st.disable("who", "a", "first")
        st.disable("who", "b", "second")
    assert st.disabled_total == 2 and st.check == "b" and len(caplog.records) == 1


def test_auto_without_a_gpu_says_why_at_start_up(caplog: pytest.LogCaptureFixture) -> None:
    settings = SchedulerSettings(streams="auto", total_sms=132, ladder={"levels": [32, 64]})
    with caplog.at_level(logging.WARNING, "omniplane.gpu"):
        a = SmApplier.from_settings(settings)
    if a.throttle.enabled:
        pytest.skip("a GPU backend is available here")
    [line] = [r.getMessage() for r in caplog.records]
    assert "SM throttling disabled: GPU backend: no GPU" in line
    if make_sampler("auto", device=0, min_interval_s=0.1).source == "null":
        with pytest.raises(CheckFailed, match="no GPU"):
            check_signal(make_sampler("auto", device=0, min_interval_s=0.1))
