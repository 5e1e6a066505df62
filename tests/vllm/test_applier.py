"""The worker side on CPU, with the null SM backend: the level each worker would run the
forward pass on, read from the control record before each execute_model."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from omniplane.control import ControlRecord, SlotState
from omniplane.vllm.applier import SmApplier
from omniplane.vllm.worker_mixin import SmCapWorkerMixin


class FakeWorker:
    def __init__(self, vllm_config: Any) -> None:
        self.vllm_config = vllm_config
        self.seen: list[tuple[str, Any]] = []

    def init_device(self) -> None:
        self.seen.append(("init", None))

    def execute_model(self, scheduler_output: Any) -> None:
        self.seen.append(("execute", self.omniplane_sm.level))  # type: ignore[attr-defined]

    def sample_tokens(self, grammar: Any) -> str:
        self.seen.append(("sample", self.omniplane_sm.level))  # type: ignore[attr-defined]
        return "tokens"


class Worker(SmCapWorkerMixin, FakeWorker):
    pass


def worker(tmp_path: Path, role: str, slot: int) -> Any:
    cfg = SimpleNamespace(
        additional_config={
            "omniplane": {
                "streams": "null",
                "total_sms": 132,
                "control": "w",
                "control_dir": str(tmp_path),
                "role": role,
                "slot": slot,
            }
        },
        model_config=SimpleNamespace(enforce_eager=True),
    )
    w = Worker(cfg)
    w.init_device()
    return w


def publish(tmp_path: Path, sms: int) -> None:
    with ControlRecord.open("w", directory=tmp_path) as rec:
        rec.write(0, SlotState(pid=1, updated_ns=time.monotonic_ns(), sm_count=sms, sm_level=None))


def test_shared_and_downstream_workers_choose_complementary_levels(tmp_path: Path) -> None:
    shared, down = worker(tmp_path, "shared", 0), worker(tmp_path, "downstream", 1)
    assert shared.omniplane_sm.streams.backend == "null"
    shared.execute_model("step"), down.execute_model("step")
    assert shared.seen[-1] == ("execute", None) and down.seen[-1] == (
        "execute",
        None,
    )  # nothing published yet
    publish(tmp_path, 64)
    shared.execute_model("step"), down.execute_model("step")
    assert shared.seen[-1] == ("execute", 7) and down.seen[-1] == ("execute", 7)
    assert shared.omniplane_sm.sms == 64 and down.omniplane_sm.sms == 68
    publish(tmp_path, 70)  # between levels: the largest level not above the cap
    shared.execute_model("step")
    assert shared.omniplane_sm.sms == 64
    publish(tmp_path, 0)  # no cap: the whole GPU
    shared.execute_model("step")
    assert shared.omniplane_sm.level is None and shared.omniplane_sm.switches == 2


def test_sample_tokens_runs_on_the_level_execute_model_chose(tmp_path: Path) -> None:
    w = worker(tmp_path, "shared", 0)
    publish(tmp_path, 32)
    w.execute_model("step")
    publish(tmp_path, 96)  # published between the two halves of a step
    assert w.sample_tokens(None) == "tokens"
    assert w.seen[-2:] == [("execute", 3), ("sample", 3)]
    assert list(w.omniplane_sm.history) == [3]


def test_without_a_record_or_ladder_nothing_is_chosen() -> None:
    a = SmApplier(None, None)
    assert a.run(lambda x: x + 1, 1) == 2 and a.level is None and a.describe()["streams"] is None


def test_auto_backend_without_gpu_or_sm_count_controls_nothing(tmp_path: Path) -> None:
    cfg = SimpleNamespace(
        additional_config={"omniplane": {"streams": "auto", "total_sms": 0}},
        model_config=SimpleNamespace(enforce_eager=False),
    )
    w = Worker(cfg)
    w.init_device()
    if w.omniplane_sm.streams is not None and w.omniplane_sm.streams.backend != "null":
        return  # a GPU is present
    w.execute_model("step")
    assert w.omniplane_sm.streams is None and w.seen[-1] == ("execute", None)
