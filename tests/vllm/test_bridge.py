"""The policy bridge: ids, stamps, lazy views, exactly-once finishes, policy failures."""

from __future__ import annotations

import math

import pytest

from omniplane.policy import FCFS, StepContext, StepDecision
from omniplane.vllm.bridge import PolicyBridge
from omniplane.vllm.settings import load_settings
from tests.vllm.fakes import FakeRequest
from tests.vllm.policies import Recording

SLOS = {
    "omniplane": {
        "slo_table": {
            "kind": "omniplane-slo-table",
            "source": "assumption: test",
            "classes": {
                "text": {"priority": 0, "path": "short", "slo_s": 1.0},
                "audio": {"priority": 10, "path": "long"},
            },
        }
    }
}


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_ids_stamps_and_deadlines() -> None:
    clock, policy = Clock(), Recording()
    b = PolicyBridge(policy, load_settings(SLOS), clock=clock)
    b.admit(FakeRequest("a", priority=0))
    clock.t = 101.5
    b.admit(FakeRequest("b", priority=10))
    assert b.admit(FakeRequest("a")) is None  # vLLM re-adding a streaming session
    assert [(t.rid, t.cls, t.arrival) for t in b.by_id.values()] == [(0, "text", 100.0), (1, "audio", 101.5)]
    assert b.by_id["a"].deadline == 101.0 and math.isinf(b.by_id["b"].deadline)
    assert (b.by_id["a"].path, b.by_id["b"].path) == ("short", "long")
    assert (
        policy.info[1].type == "audio"
        and policy.info[1].arrival == 101.5
        and policy.info[1].output_tokens == 5
    )


def test_finish_is_reported_exactly_once() -> None:
    policy = Recording()
    b = PolicyBridge(policy, load_settings(), clock=Clock())
    b.admit(FakeRequest("a"))
    assert b.finish("a") and not b.finish("a") and not b.finish("never-seen")
    assert policy.finishes == {0: 1} and b.finished == 1 and not b.by_rid


def test_views_are_lazy_and_match_the_requests() -> None:
    built = []

    class Counting(FCFS):
        pass

    b = PolicyBridge(Counting(), load_settings(), clock=Clock())
    reqs = [FakeRequest(str(i), prompt=8) for i in range(50)]
    for r in reqs:
        b.admit(r)
    real = b.seq_info
    b.seq_info = lambda r: built.append(r) or real(r)  # type: ignore[method-assign]
    ctx = b.context(reqs, [], downstream_active=0, bw_util=0.0, total_sms=0, now=1.0)
    b.decide(ctx)
    assert built == []  # FCFS never looks
    reqs[3].num_computed_tokens, reqs[3].num_output_tokens = 8, 2
    s = ctx.waiting[3]
    assert (s.rid, s.computed_tokens, s.generated, s.decoding) == (3, 8, 2, True)
    assert [x.rid for x in ctx.waiting[1:3]] == [1, 2] and len(list(ctx.waiting)) == 50


def test_hidden_and_ordered_translate_rids_to_requests() -> None:
    b = PolicyBridge(FCFS(), load_settings(), clock=Clock())
    reqs = [FakeRequest(str(i)) for i in range(4)]
    for r in reqs:
        b.admit(r)
    d = StepDecision(hidden=frozenset({1, 3, 99}), order=(2, 0))
    assert b.hidden_requests(d, reqs) == [reqs[1], reqs[3]]
    assert b.ordered(d, [reqs[0], reqs[2], reqs[1]]) == [reqs[2], reqs[0], reqs[1]]
    assert b.ordered(StepDecision(), reqs) is None
    stranger = FakeRequest("x")  # not tracked: never hidden, ordered last, no KeyError
    assert b.hidden_requests(d, [*reqs, stranger]) == [reqs[1], reqs[3]]
    assert b.ordered(d, [stranger, reqs[2]]) == [reqs[2], stranger] and b.policy_errors == 0


def test_reconcile_finishes_what_the_scheduler_no_longer_holds() -> None:
    policy = Recording()
    b = PolicyBridge(policy, load_settings(), clock=Clock())
    reqs = {str(i): FakeRequest(str(i)) for i in range(3)}
    for r in reqs.values():
        b.admit(r)
    del reqs["1"]
    assert b.reconcile(reqs, 5.0) == 1 and policy.finishes == {1: 1}
    assert b.reconcile(reqs, 6.0) == 0 and set(b.by_id) == {"0", "2"}


def test_policy_failures_fall_back_or_raise() -> None:
    class Broken(FCFS):
        def decide(self, ctx: StepContext) -> StepDecision:
            raise KeyError("boom")

    b = PolicyBridge(Broken(), load_settings(), clock=Clock())
    ctx = b.context([], [], downstream_active=0, bw_util=0.0, total_sms=0, now=0.0)
    assert b.decide(ctx) == StepDecision() and b.policy_errors == 1
    strict = PolicyBridge(Broken(), load_settings({"omniplane": {"on_policy_error": "raise"}}), clock=Clock())
    with pytest.raises(KeyError):
        strict.decide(ctx)
