"""The scheduler wrapper on a stand-in scheduler (no vLLM): the same invariants as the real
vLLM tests, plus the control record a downstream stage publishes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from omniplane.control import ControlRecord
from omniplane.vllm.mixin import PolicySchedulerMixin
from tests.vllm.fakes import FakeRequest, FakeScheduler


class Wrapped(PolicySchedulerMixin, FakeScheduler):
    pass


def make(**settings: Any) -> Any:
    cfg = SimpleNamespace(additional_config={"omniplane": {"sampler": "null", **settings}})
    return Wrapped(vllm_config=cfg)


def test_hidden_requests_wait_and_come_back() -> None:
    s = make(policy="import:tests.vllm.policies:HideEveryOther")
    for i in range(6):
        s.add_request(FakeRequest(str(i)))
    out = s.schedule()
    assert set(out.num_scheduled_tokens) == {"0", "2"}  # step 0 hides positions 1, 3, 5
    assert [r.request_id for r in s.waiting] == ["1", "3", "4", "5"]
    s.update_from_output(out, None)
    policy = s.omniplane.bridge.policy
    assert policy.finishes == {0: 1, 2: 1} and policy.outcomes[-1].scheduled == (0, 2)
    assert policy.outcomes[-1].first_tokens == (0, 2)


def test_exception_restores_the_queue() -> None:
    s = make(policy="import:tests.vllm.policies:HideEveryOther")
    for i in range(4):
        s.add_request(FakeRequest(str(i)))
    s.fail = True
    with pytest.raises(RuntimeError, match="vLLM failed"):
        s.schedule()
    assert [r.request_id for r in s.waiting] == ["0", "1", "2", "3"]


def test_aborts_report_once() -> None:
    s = make(policy="import:tests.vllm.policies:Recording")
    for i in range(3):
        s.add_request(FakeRequest(str(i)))
    s.finish_requests(["1"], "aborted")
    s.finish_requests("1", "aborted")
    assert s.omniplane.bridge.policy.finishes == {1: 1}


def test_downstream_stage_publishes_its_activity(tmp_path: Path) -> None:
    s = make(role="downstream", slot=2, control="ds", control_dir=str(tmp_path))
    for i in range(3):
        s.add_request(FakeRequest(str(i)))
    out = s.schedule()
    with ControlRecord.open("ds", directory=tmp_path, create=False) as rec:
        first = rec.read(2)
        assert first is not None and first.active == 3 and first.sm_level is None
        s.update_from_output(out, None)
        after = rec.read(2)
        assert after is not None and after.active == 1
    s.shutdown()
