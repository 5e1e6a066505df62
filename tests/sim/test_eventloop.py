"""The event kernel: ordering rules and failure rules."""

from __future__ import annotations

import pytest

from omniplane.sim.eventloop import ARRIVE, COMPLETE, DISPATCH, EventLoop


def test_same_time_events_run_by_priority_then_insertion() -> None:
    loop = EventLoop()
    seen: list[str] = []
    loop.at(1.0, seen.append, "arrive-1", ARRIVE)
    loop.at(1.0, seen.append, "complete", COMPLETE)
    loop.at(0.5, seen.append, "early", ARRIVE)
    loop.at(1.0, seen.append, "arrive-2", ARRIVE)
    loop.run()
    assert seen == ["early", "complete", "arrive-1", "arrive-2"]
    assert loop.now == 1.0 and loop.events == 4


def test_cannot_schedule_in_the_past() -> None:
    loop = EventLoop()
    loop.at(2.0, lambda _: loop.at(1.0, print), None)
    with pytest.raises(ValueError, match="before now"):
        loop.run()


def test_run_until_leaves_later_events_queued() -> None:
    loop = EventLoop()
    seen: list[float] = []
    for t in (1.0, 2.0, 3.0):
        loop.at(t, seen.append, t)
    loop.run(until=2.5)
    assert seen == [1.0, 2.0] and loop.pending == 1 and loop.now == 2.5


def test_callback_errors_propagate_with_a_note() -> None:
    loop = EventLoop()

    def boom(_: object) -> None:
        raise KeyError("x")

    loop.at(1.5, boom)
    with pytest.raises(KeyError) as info:
        loop.run()
    assert any("t=1.5" in n for n in info.value.__notes__)


def test_a_stream_merges_with_the_heap_by_time_and_priority() -> None:
    loop = EventLoop()
    seen: list[object] = []
    loop.stream([0.5, 1.0, 1.0, 2.0], lambda i: seen.append(f"s{i}"), ARRIVE)
    loop.at(1.0, seen.append, "complete", COMPLETE)  # a lower priority value runs first
    loop.at(1.0, seen.append, "dispatch", DISPATCH)
    loop.at(1.0, seen.append, "arrive", ARRIVE)  # same priority: the stream was scheduled first
    loop.run()
    assert seen == ["s0", "complete", "s1", "s2", "arrive", "dispatch", "s3"]
    assert loop.events == 7 and loop.pending == 0


def test_a_stream_pauses_and_resumes_with_run_until() -> None:
    loop = EventLoop()
    seen: list[int] = []
    loop.stream([1.0, 2.0, 3.0], seen.append)
    loop.run(until=2.5)
    assert seen == [0, 1] and loop.pending == 1 and loop.now == 2.5
    loop.run()
    assert seen == [0, 1, 2]


def test_a_stream_must_be_in_time_order() -> None:
    with pytest.raises(ValueError, match="non-decreasing"):
        EventLoop().stream([1.0, 0.5], print)


def test_soon_runs_after_every_event_of_the_instant() -> None:
    loop = EventLoop()
    seen: list[str] = []

    def first(_: object) -> None:
        seen.append("first")
        loop.soon(lambda: seen.append("end of 1.0"))
        loop.at(1.0, seen.append, "later event at 1.0", DISPATCH)

    loop.at(1.0, first, None, COMPLETE)
    loop.at(2.0, seen.append, "2.0")
    loop.run()
    assert seen == ["first", "later event at 1.0", "end of 1.0", "2.0"]
