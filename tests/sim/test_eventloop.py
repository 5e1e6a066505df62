"""The event kernel: ordering rules and failure rules."""

from __future__ import annotations

import pytest

from omniplane.sim.eventloop import ARRIVE, COMPLETE, EventLoop


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
