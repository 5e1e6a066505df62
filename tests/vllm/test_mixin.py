"""The scheduler wrapper on a stand-in scheduler (no vLLM): the same invariants as the real
vLLM tests, plus the control record a downstream stage publishes."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from omniplane.control import ControlRecord
from omniplane.vllm.mixin import PolicySchedulerMixin
from tests.vllm.fakes import FakeRequest, FakeScheduler
from tests.vllm.policies import POLICY_PREFIX


class Wrapped(PolicySchedulerMixin, FakeScheduler):
    pass


def make(**settings: Any) -> Any:
    cfg = SimpleNamespace(additional_config={"omniplane": {"sampler": "null", **settings}})
    return Wrapped(vllm_config=cfg)


def test_hidden_requests_wait_and_come_back() -> None:
    s = make(policy=POLICY_PREFIX + "HideEveryOther")
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
    s = make(policy=POLICY_PREFIX + "HideEveryOther")
    for i in range(4):
        s.add_request(FakeRequest(str(i)))
    s.fail = True
    with pytest.raises(RuntimeError, match="vLLM failed"):
        s.schedule()
    assert [r.request_id for r in s.waiting] == ["0", "1", "2", "3"]


def test_aborts_report_once() -> None:
    s = make(policy=POLICY_PREFIX + "Recording")
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


def test_horizon_policy_hides_the_other_path_in_the_scheduler() -> None:
    s = make(policy="horizon")
    for i, prio in enumerate((10, 10, 0, 0)):  # two audio (long path), then two text (short)
        s.add_request(FakeRequest(str(i), priority=prio))
    out = s.schedule()  # a short-path phase: the audio prefills are hidden for this step
    assert set(out.num_scheduled_tokens) == {"2", "3"}
    assert [r.request_id for r in s.waiting] == ["0", "1"]
    s.update_from_output(out, None)
    # only audio waits: the short-path phase has no short-path work to protect, so the
    # work-conserving rotation shows the audio requests, which run next
    out = s.schedule()
    assert set(out.num_scheduled_tokens) == {"0", "1"}
    s.update_from_output(out, None)
    assert not s.waiting and not s.requests


def test_a_request_gone_without_a_finish_report_is_reconciled() -> None:
    """A finish vLLM never reported (the request left ``requests``) is reported at the next
    step, so the policy's state (the long-path cap's occupancy) does not keep it for good."""
    s = make(policy=POLICY_PREFIX + "Recording")
    for i in range(3):
        s.add_request(FakeRequest(str(i)))
    del s.requests["1"]  # gone, no finish_requests / finished_req_ids
    s.waiting.remove(next(r for r in s.waiting if r.request_id == "1"))
    s.schedule()
    assert s.omniplane.bridge.policy.finishes == {1: 1} and "1" not in s.omniplane.bridge.by_id


def test_horizon_without_a_configured_ladder_refuses_to_throttle(
    caplog: pytest.LogCaptureFixture, reading_sampler: Any
) -> None:
    """The default ladder tops out near the whole GPU (the paper's unsafe regime): without
    ladder.s_max / levels the policy runs without SM throttling and says so."""
    with caplog.at_level("WARNING"):
        s = make(policy="horizon", total_sms=132)
    policy = s.omniplane.bridge.policy
    assert not policy.config.spatial.throttle and "will not throttle" in caplog.text
    safe = make(policy="horizon", total_sms=132, ladder={"s_min": 40, "s_max": 64})
    assert safe.omniplane.bridge.policy.config.spatial.throttle
    assert safe.omniplane.bridge.policy.spatial.ladder.s_cap == 64


class SkippingScheduler(FakeScheduler):
    """vLLM 0.30's two waiting queues (``v1/core/sched/scheduler.py``): ``skipped_waiting``
    (blocked or set-aside requests) is drained before ``waiting``; a request whose ``blocked``
    is set is skipped and stays there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.skipped_waiting: deque[FakeRequest] = deque()

    def schedule(self) -> Any:
        ready = [r for r in self.skipped_waiting if not getattr(r, "blocked", False)]
        take = ready[: self.batch]
        for r in take:
            self.skipped_waiting.remove(r)
        self.batch -= len(take)
        try:
            out = super().schedule()
        finally:
            self.batch += len(take)
        self.running += take
        for r in take:
            r.num_computed_tokens = r.num_prompt_tokens
        parked = {r.request_id: r.num_prompt_tokens for r in take}
        out.num_scheduled_tokens = parked | out.num_scheduled_tokens
        return out


class WrappedSkipping(PolicySchedulerMixin, SkippingScheduler):
    pass


def _park(s: Any, rid: str, blocked: bool) -> FakeRequest:
    """Move a waiting request to ``skipped_waiting`` (as vLLM does with one it sets aside)."""
    r = next(r for r in s.waiting if r.request_id == rid)
    s.waiting.remove(r)
    r.blocked = blocked
    s.skipped_waiting.append(r)
    return r


def test_requests_parked_in_skipped_waiting_are_seen_and_counted(tmp_path: Path) -> None:
    """vLLM 0.30 parks some waiting requests in ``skipped_waiting``: the policy sees them as
    waiting (ahead of ``waiting``, in the order vLLM drains them), the published activity counts
    them, they are never hidden (vLLM takes that queue first) and they stay where vLLM put them."""
    cfg = SimpleNamespace(additional_config={"omniplane": {
        "sampler": "null", "policy": POLICY_PREFIX + "HideAll", "role": "downstream", "slot": 1,
        "control": "sk", "control_dir": str(tmp_path)}})
    s = WrappedSkipping(vllm_config=cfg)
    for i in range(4):
        s.add_request(FakeRequest(str(i)))
    _park(s, "2", blocked=True)
    _park(s, "3", blocked=False)
    policy = s.omniplane.bridge.policy
    out = s.schedule()
    assert policy.contexts[-1][1] == 4  # two in waiting, two in skipped_waiting
    assert policy.last_hidden == frozenset({0, 1, 2, 3})  # the policy hides all four ...
    assert set(out.num_scheduled_tokens) == {"3"}  # ... but vLLM admits the unblocked parked one
    assert [r.request_id for r in s.waiting] == ["0", "1"]
    assert [r.request_id for r in s.skipped_waiting] == ["2"]  # untouched: no hide, no restore
    with ControlRecord.open("sk", directory=tmp_path, create=False) as rec:
        first = rec.read(1)
        assert first is not None and first.active == 4  # "3" running, "0" and "1" waiting, "2" parked
        s.update_from_output(out, None)
        after = rec.read(1)
        assert after is not None and after.active == 3  # "3" finished; "2" still parked counts
    assert policy.finishes == {3: 1}
    s.shutdown()


def test_a_scheduler_whose_memory_signal_does_not_read_does_not_throttle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fail closed: no memory-activity signal (a null sampler, as ``auto`` gives without a GPU),
    no SM caps: one warning line, the reason in ``omniplane.throttle``; rotation goes on."""
    with caplog.at_level("WARNING"):
        s = make(policy="horizon", total_sms=132, ladder={"levels": [40, 64]})
    state = s.omniplane.throttle
    assert not state.enabled and state.check == "memory-activity signal" and state.disabled_total == 1
    assert not s.omniplane.bridge.policy.config.spatial.throttle
    assert s.omniplane.bridge.policy.config.rotation.rotate  # the temporal scheduler stays
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(lines) == 1 and "SM throttling disabled: memory-activity signal: null sampler" in lines[0]


def test_a_scheduler_whose_memory_signal_reads_throttles(reading_sampler: Any) -> None:
    s = make(policy="horizon", total_sms=132, ladder={"levels": [40, 64]})
    assert s.omniplane.throttle.enabled and s.omniplane.throttle.passed == [
        "memory-activity signal (test-reading)"
    ]
    assert s.omniplane.bridge.policy.spatial.ladder.levels == (40, 64)


def test_a_policy_s_own_cap_is_not_published_once_throttling_is_off(tmp_path: Path) -> None:
    """An ``import:`` policy that sets ``sm_cap`` itself: with the memory signal failing its
    check (null sampler) the cap stays in the process; the control record shows none."""
    s = make(policy=POLICY_PREFIX + "FixedCap", total_sms=132, ladder={"levels": [40, 64]},
             control="cap", control_dir=str(tmp_path))
    s.add_request(FakeRequest("0"))
    s.schedule()
    assert not s.omniplane.throttle.enabled and s.omniplane.last_decision.sm_cap == 64
    with ControlRecord.open("cap", directory=tmp_path, create=False) as rec:
        state = rec.read(0)
    assert state is not None and state.sm_count == 0 and state.sm_level is None
