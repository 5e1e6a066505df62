"""The baselines that ship today: static-cap (SGLang-Omni), priority (vLLM) and EDF."""

from __future__ import annotations

import pytest

from omniplane.policy import FCFS, PathClass, SeqInfo, StepContext, StepOutcome
from omniplane.sched.baselines import EDF, ClassPriority, FixedSplit
from omniplane.sched.calibration import CAPACITY_FRACTION, SweepPoint, capacity_cap
from omniplane.sched.factory import SHIPPED, make_policy
from tests.sched.helpers import LADDER, PROFILES, Seq, TinyEngine


def _ctx(waiting: list[SeqInfo], now: float = 1.0) -> StepContext:
    return StepContext(now, 0, waiting, [], 0, 0.0, 142)


def test_priority_orders_by_class_priority_then_arrival_like_vllm() -> None:
    pol, mode = make_policy("priority", PROFILES, LADDER)
    assert isinstance(pol, ClassPriority) and mode == "timeslice" and "priority" in SHIPPED
    assert pol.priority == {"text": 0, "speech": 1}  # short path first
    reqs = [SeqInfo(1, "speech", 0.0, 10, 0, 5, 0), SeqInfo(2, "text", 0.9, 10, 0, 5, 0),
            SeqInfo(3, "speech", 0.1, 10, 0, 5, 0), SeqInfo(4, "text", 0.3, 10, 0, 5, 0)]
    for r in reqs:
        pol.on_arrival(r, r.arrival)
    d = pol.decide(_ctx(reqs))
    # (priority, arrival): the two text requests by arrival, then the two speech ones
    assert d.order == (4, 2, 1, 3) and d.hidden == frozenset() and d.sm_cap is None
    with pytest.raises(KeyError, match="no priority for request class 'image'"):
        pol.on_arrival(SeqInfo(5, "image", 0.0, 1, 0, 1, 0), 0.0)
    with pytest.raises(ValueError, match="priority per request class"):
        ClassPriority({})


def test_priority_admits_a_later_short_request_before_earlier_long_ones() -> None:
    eng = TinyEngine(ClassPriority.by_path({"text": PathClass.SHORT, "speech": PathClass.LONG}), max_batch=1)
    for s in (Seq(1, "speech", 0.0, 8, 20), Seq(2, "speech", 0.0, 8, 20), Seq(3, "text", 0.01, 8, 2)):
        eng.arrive(s)
    eng.step()
    assert eng.steps[0].admitted == [3]
    fcfs = TinyEngine(FCFS(), max_batch=1)
    for s in (Seq(1, "speech", 0.0, 8, 20), Seq(2, "speech", 0.0, 8, 20), Seq(3, "text", 0.01, 8, 2)):
        fcfs.arrive(s)
    fcfs.step()
    assert fcfs.steps[0].admitted == [1]


def test_capacity_cap_is_the_smallest_count_reaching_the_fraction_of_uncapped_throughput() -> None:
    # throughput 1/t: uncapped (132 SMs) 1/1.0; 0.95 of it needs t <= 1/0.95 = 1.0526
    pts = (SweepPoint(16, 2.0), SweepPoint(32, 1.06), SweepPoint(40, 1.05), SweepPoint(64, 0.9),
           SweepPoint(132, 1.0))
    assert CAPACITY_FRACTION == 0.95
    assert capacity_cap(pts) == 40
    assert capacity_cap(pts, 0.5) == 16  # one-sided: the smallest count that reaches it
    assert capacity_cap(pts, 1.0) == 64  # the best below the full GPU also counts
    with pytest.raises(ValueError, match="fraction"):
        capacity_cap(pts, 0.0)
    with pytest.raises(ValueError, match="non-empty"):
        capacity_cap(())


def test_static_cap_holds_its_cap_on_every_step_and_admits_fcfs() -> None:
    pol, mode = make_policy("static-cap", PROFILES, LADDER, static_cap=32)
    assert isinstance(pol, FixedSplit) and isinstance(pol.inner, FCFS) and mode == "split"
    assert pol.name == "static-cap" and "static-cap" in SHIPPED
    reqs = [SeqInfo(1, "speech", 0.0, 10, 0, 5, 0), SeqInfo(2, "text", 0.9, 10, 0, 5, 0)]
    for r in reqs:
        pol.on_arrival(r, r.arrival)
    for k in range(3):
        d = pol.decide(StepContext(1.0 + k, k, reqs, [], k, 0.9 * k / 2, 142))
        assert d.sm_cap == 32 and d.order is None and d.hidden == frozenset()
        pol.on_step(StepOutcome(1.1 + k, 0.1, (), (), 32))
    with pytest.raises(ValueError, match="static-cap' needs its SM cap"):
        make_policy("static-cap", PROFILES, LADDER)


def test_edf_is_on_the_first_response_deadline_arrival_plus_class_slo() -> None:
    pol, mode = make_policy("edf", PROFILES, LADDER)
    assert isinstance(pol, EDF) and mode == "timeslice"
    # text SLO 0.2 s, speech 20 s: a speech request 10 s older still comes after a new text one
    reqs = [SeqInfo(1, "speech", 0.0, 10, 0, 5, 0), SeqInfo(2, "text", 10.0, 10, 0, 5, 0),
            SeqInfo(3, "speech", 9.0, 10, 0, 5, 0)]
    for r in reqs:
        pol.on_arrival(r, r.arrival)
    assert pol.decide(_ctx(reqs, 10.0)).order == (2, 1, 3)
