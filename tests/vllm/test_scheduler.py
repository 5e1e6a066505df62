"""OmniplaneScheduler against vLLM's real v1 Scheduler on CPU, with synthetic model outputs.

Mixed text/audio/image requests (priorities 0/10/20) arrive over the first steps and run to
completion through hundreds of schedule()/update_from_output() cycles, with a small KV cache so
that vLLM preempts. Checked after every step: hidden requests are back in the waiting queue,
what vLLM admitted from the waiting queue was in the policy's visible view; at the end every
request finished exactly once, and the policy saw each arrival and finish exactly once.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.request import RequestStatus  # noqa: E402

from omniplane.control import ControlRecord, SlotState  # noqa: E402
from omniplane.vllm.scheduler import OmniplaneAsyncScheduler, OmniplaneScheduler  # noqa: E402
from tests.vllm.harness import (  # noqa: E402
    HORIZON_SLO_TABLE,
    arrivals,
    check_exception_in_schedule_loses_nothing,
    check_fcfs_is_the_bare_scheduler,
    check_hundreds_of_cycles,
    check_view,
    make_request,
    make_scheduler,
    run,
    synthetic_output,
)
from tests.vllm.policies import POLICY_PREFIX  # noqa: E402


def omni(configs: dict[str, Any], policy: str, queue: str = "fcfs", **extra: Any) -> Any:
    return make_scheduler(
        OmniplaneScheduler, configs[queue], {"policy": POLICY_PREFIX + policy, "sampler": "null", **extra}
    )


def test_mixed_classes_hundreds_of_cycles_finish_exactly_once(configs: dict[str, Any]) -> None:
    check_hundreds_of_cycles(omni(configs, "HideEveryOther"), seed=1)


def test_fcfs_wrapper_schedules_exactly_like_bare_vllm(configs: dict[str, Any]) -> None:
    bare = make_scheduler(Scheduler, configs["fcfs"], None)
    check_fcfs_is_the_bare_scheduler(bare, omni(configs, "Recording"))


def test_exception_inside_vllm_schedule_loses_nothing(configs: dict[str, Any]) -> None:
    check_exception_in_schedule_loses_nothing(omni(configs, "HideEveryOther"))


def test_policy_exceptions_fall_back_to_fcfs_and_are_counted(configs: dict[str, Any]) -> None:
    sched = omni(configs, "Raising")
    steps = run(sched, arrivals(30, seed=4))
    policy = sched.omniplane.bridge.policy
    assert not sched.has_requests() and len(policy.finishes) == 30
    assert sched.omniplane.bridge.policy_errors >= steps  # every on_step plus every third decide
    raising = omni(configs, "Raising", on_policy_error="raise")
    raising.add_request(make_request(0, random.Random(5)))
    with pytest.raises(RuntimeError, match="policy failure"):
        raising.schedule()
    assert [r.request_id for r in raising.waiting] == ["req-0"]


def test_order_admits_the_newest_first_and_restores_fcfs(configs: dict[str, Any]) -> None:
    sched = omni(configs, "Reverse")
    rng = random.Random(6)
    reqs = [make_request(i, rng) for i in range(20)]
    for r in reqs:
        sched.add_request(r)
    out = sched.schedule()
    admitted = [r.req_id for r in out.scheduled_new_reqs]
    assert admitted[0] == "req-19"
    left = [r.request_id for r in sched.waiting]
    assert left == [r.request_id for r in reqs if r.request_id not in set(admitted)]


def test_hiding_works_on_vllms_priority_queue(configs: dict[str, Any]) -> None:
    sched = omni(configs, "HideAll", queue="priority")
    rng = random.Random(7)
    for i in range(5):
        sched.add_request(make_request(i, rng))
    out = sched.schedule()
    assert not out.num_scheduled_tokens and len(sched.waiting) == 5
    sched.update_from_output(out, synthetic_output(sched, out, rng))
    sched2 = omni(configs, "HideEveryOther", queue="priority")
    steps = run(sched2, arrivals(40, seed=8), after=check_view)
    assert not sched2.has_requests() and len(sched2.omniplane.bridge.policy.finishes) == 40 and steps > 40


def test_aborts_finish_once_and_deadlines_use_the_slo_table(
    configs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNIPLANE_SLO_AUDIO", "2.5")
    sched = omni(
        configs,
        "Recording",
        slo_table={
            "kind": "omniplane-slo-table",
            "source": "assumption: test",
            "classes": {
                "text": {"priority": 0, "path": "short", "slo_s": 0.4},
                "audio": {"priority": 10, "path": "long"},
                "image": {"priority": 20, "path": "long", "slo_s": 9.0},
            },
        },
    )
    rng = random.Random(9)
    for i in range(9):
        sched.add_request(make_request(i, rng, priority=(0, 10, 20)[i % 3]))
    slo = {"text": 0.4, "audio": 2.5, "image": 9.0}
    for t in sched.omniplane.bridge.by_id.values():
        assert t.deadline - t.arrival == pytest.approx(slo[t.cls])
    out = sched.schedule()
    sched.update_from_output(out, synthetic_output(sched, out, rng))
    running = [r.request_id for r in sched.running][:2]
    waiting = [r.request_id for r in sched.waiting][:2]
    sched.finish_requests(running + waiting, RequestStatus.FINISHED_ABORTED)
    sched.finish_requests(running, RequestStatus.FINISHED_ABORTED)  # again: no second report
    run(sched, {})
    policy = sched.omniplane.bridge.policy
    assert len(policy.finishes) == 9 and set(policy.finishes.values()) == {1}


def test_sm_cap_is_snapped_and_published_for_the_workers(
    configs: dict[str, Any], tmp_path: Any, reading_sampler: Any
) -> None:
    shared = omni(configs, "Capper", control="t1", control_dir=str(tmp_path), total_sms=132)
    down = ControlRecord.open("t1", slots=4, directory=tmp_path, create=False)
    rng = random.Random(10)
    shared.add_request(make_request(0, rng))
    out = shared.schedule()
    state = down.read(0)
    assert state is not None and state.sm_level is None and state.sm_count == 0  # nothing downstream: no cap
    shared.update_from_output(out, synthetic_output(shared, out, rng))
    import time

    down.write(1, SlotState(pid=1, active=3, updated_ns=time.monotonic_ns()))
    shared.schedule()
    state = down.read(0)
    assert shared.omniplane.bridge.policy.downstream[-1] == 3
    assert state is not None and state.sm_count == 64 and state.sm_level == 7  # levels 8, 16, ..., 120
    down.close()


def test_async_scheduler_variant_keeps_the_invariants(configs: dict[str, Any]) -> None:
    sched = make_scheduler(
        OmniplaneAsyncScheduler, configs["fcfs"],
        {"policy": POLICY_PREFIX + "HideEveryOther", "sampler": "null"},
    )
    steps = run(sched, arrivals(45, seed=11), after=check_view)
    policy = sched.omniplane.bridge.policy
    assert not sched.has_requests() and steps > 45
    assert len(policy.finishes) == 45 and set(policy.finishes.values()) == {1}
    assert set(Counter(r for o in policy.outcomes for r in o.first_tokens).values()) == {1}


def test_horizon_policy_in_vllm_keeps_the_invariants_and_caps_on_the_ladder(
    configs: dict[str, Any], tmp_path: Any, reading_sampler: Any
) -> None:
    """``policy: horizon`` as the settings build it (SLO table, ladder S_min..S_cap), with a
    downstream stage reporting activity every other 20 steps: vLLM admits only what HorizonServe
    left visible, admitted requests are never hidden, every request finishes once, and the
    published cap is a ladder level while the downstream stage is active, the whole GPU otherwise."""
    import time

    table = HORIZON_SLO_TABLE
    sched = omni(
        configs, "WatchedHorizon", slo_table=table, control="hz", control_dir=str(tmp_path),
        total_sms=132, ladder={"s_min": 40, "s_max": 64},
    )
    down = ControlRecord.open("hz", slots=4, directory=tmp_path, create=False)
    caps: list[tuple[int, int | None, int]] = []
    caps_hidden: list[tuple[int, bool]] = []

    def before(s: Any, step: int) -> None:
        active = 2 if (step // 20) % 2 else 0
        down.write(1, SlotState(pid=1, active=active, updated_ns=time.monotonic_ns()))

    def after(s: Any, step: int, out: Any, snap: dict[str, list[str]]) -> None:
        check_view(s, step, out, snap)
        assert s.omniplane.last_hidden.isdisjoint(snap["running"])
        state = down.read(0)
        assert state is not None
        caps.append((s.omniplane.bridge.policy.downstream[-1], state.sm_level, state.sm_count))
        caps_hidden.append((step, bool(s.omniplane.last_hidden)))

    steps = run(sched, arrivals(90, seed=12), before=before, after=after)
    policy = sched.omniplane.bridge.policy
    assert not sched.has_requests() and len(policy.finishes) == 90 and set(policy.finishes.values()) == {1}
    assert sum(1 for c in policy.caps if c is not None) == steps
    assert sum(1 for _, hidden in caps_hidden if hidden) >= 10, "rotation rarely hid anything"
    co = [(lvl, sms) for active, lvl, sms in caps if active]
    alone = [(lvl, sms) for active, lvl, sms in caps if not active]
    assert co and alone
    assert all(sms in (40, 48, 56, 64) and lvl is not None for lvl, sms in co)
    assert all(lvl is None for lvl, _ in alone)  # S_aggr: the whole GPU, no green context
    down.close()
