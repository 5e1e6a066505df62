"""Model time on a wall clock; the simulator's event interface fired by asyncio."""

from __future__ import annotations

import asyncio

import pytest

from omniplane.deploy import vtime
from omniplane.deploy.clock import LagStats, RealTimeLoop, VirtualClock


def test_clock_maps_model_time_to_wall_time() -> None:
    wall = [100.0]
    c = VirtualClock(90.0, 10.0, lambda: wall[0])
    assert c.now() == pytest.approx(1.0)
    assert c.wall_delay(3.0) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="time scale"):
        VirtualClock(0.0, 0.0)


def test_timers_fire_in_time_order_at_their_nominal_time() -> None:
    async def main() -> list[tuple[str, float]]:
        loop = RealTimeLoop(VirtualClock.starting_now(5.0, asyncio.get_running_loop().time))
        seen: list[tuple[str, float]] = []
        for name, t in (("b", 2.0), ("a", 1.0), ("c", 2.5)):
            loop.at(t, lambda n: seen.append((n, loop.now)), name)
        await asyncio.sleep(20.0)  # 4 model seconds at scale 5
        return seen

    assert vtime.run(main()) == [("a", 1.0), ("b", 2.0), ("c", 2.5)]


def test_a_late_timer_runs_at_its_nominal_time_and_the_lag_is_recorded() -> None:
    async def main() -> tuple[float, dict[str, float]]:
        aio = asyncio.get_running_loop()
        clock = VirtualClock.starting_now(1.0, aio.time)
        loop = RealTimeLoop(clock)
        seen: list[float] = []
        loop.at(1.0, lambda _: seen.append(loop.now))
        # the process is "descheduled": block the loop past the timer
        aio.call_at(0.5, lambda: setattr(aio, "now", aio.now + 0.7))  # type: ignore[attr-defined]
        await asyncio.sleep(3.0)
        return seen[0], loop.lag.summary()

    t, lag = vtime.run(main())
    assert t == 1.0
    assert lag["max_ms"] == pytest.approx(200.0)


def test_a_failing_callback_is_recorded_not_raised() -> None:
    async def main() -> list[str]:
        loop = RealTimeLoop(VirtualClock.starting_now(1.0, asyncio.get_running_loop().time))
        loop.at(0.1, lambda _: 1 / 0)
        await asyncio.sleep(1.0)
        return loop.errors

    assert vtime.run(main()) == ["ZeroDivisionError: division by zero"]


def test_lag_summary_of_nothing_is_zero() -> None:
    assert LagStats().summary()["p99_ms"] == 0.0
