"""The vLLM plugin that makes the engine core sleep between polls of its worker's queue
(``omniplane.vllm.shmwait``) on a stand-in for vLLM's ``SpinCondition``: no vLLM needed."""

from __future__ import annotations

import builtins
import time
from typing import Any

import pytest

from omniplane.vllm import shmwait


class Spin:
    """The part of vLLM 0.30's ``SpinCondition`` the patch relies on."""

    def __init__(self, is_reader: bool, busy_loop_s: float = 1.0) -> None:
        self.is_reader = is_reader
        self.busy_loop_s = busy_loop_s
        self.last_read = time.monotonic()
        self.waited: list[int | None] = []

    def wait(self, timeout_ms: int | None = None) -> None:
        self.waited.append(timeout_ms)


def fresh() -> type[Spin]:
    return type("Spin", (Spin,), {})


def test_the_setting_is_read_from_the_environment_and_bad_values_name_the_variable() -> None:
    assert shmwait.poll_s({}) is None and shmwait.poll_s({shmwait.ENV: ""}) is None
    assert shmwait.poll_s({shmwait.ENV: "0.0005"}) == 0.0005
    for bad in ("fast", "-1", "nan"):
        with pytest.raises(ValueError, match=f"{shmwait.ENV}: expected seconds >= 0, got '{bad}'"):
            shmwait.poll_s({shmwait.ENV: bad})


def test_a_busy_reader_sleeps_between_polls_instead_of_spinning() -> None:
    cls = fresh()
    slept: list[float] = []
    assert shmwait.patch(cls, 0.0005, sleep=slept.append)
    reader = cls(is_reader=True)
    reader.wait(5000)
    assert slept == [0.0005] and reader.waited == []  # inside vLLM's busy window: a short sleep
    reader.last_read -= 2.0  # past the window: vLLM's own wait (parks on the notification)
    reader.wait(5000)
    assert slept == [0.0005] and reader.waited == [5000]
    writer = cls(is_reader=False)
    writer.wait(7)
    assert writer.waited == [7]


def test_the_patch_is_applied_once_and_zero_changes_nothing() -> None:
    cls = fresh()
    slept: list[float] = []
    assert shmwait.patch(cls, 0.001, sleep=slept.append)
    assert not shmwait.patch(cls, 0.002, sleep=slept.append)  # a second load of the plugin
    cls(is_reader=True).wait(1)
    assert slept == [0.001]
    zero = fresh()
    assert shmwait.patch(zero, 0.0, sleep=slept.append)
    r = zero(is_reader=True)
    r.wait(3)
    assert r.waited == [3] and slept == [0.001]


def test_without_the_variable_the_plugin_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(shmwait.ENV, raising=False)
    imported: list[Any] = []
    real = builtins.__import__

    def spy(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    shmwait.register()
    assert "vllm.distributed.device_communicators" not in imported
