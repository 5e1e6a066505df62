"""The temporal scheduler: N:M rotation, slack guard, long-path cap (section 4.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.policy import PathClass
from omniplane.sched.profiler import RequestSignals
from omniplane.sched.temporal import RotationConfig, TemporalScheduler


def _sig(rid: int, path: PathClass, deadline: float = 10.0, protect_at: float = 5.0,
         protected: bool = False) -> RequestSignals:
    return RequestSignals(rid, path.value, path, deadline, 1.0, 2.0, protected, protect_at)


def _phases(ts: TemporalScheduler, n: int) -> str:
    return "".join("S" if ts.view().phase is PathClass.SHORT else "L" for _ in range(n))


def test_rotation_is_n_short_then_m_long_with_no_pressure() -> None:
    ts = TemporalScheduler(RotationConfig())
    assert _phases(ts, 12) == "SSLL" * 3  # N = N_min = 2 with no protected short-path request


def test_all_protected_short_path_requests_raise_n_to_n_max() -> None:
    ts = TemporalScheduler(RotationConfig())
    for rid in range(3):
        ts.add(_sig(rid, PathClass.SHORT, protected=True))
    assert _phases(ts, 20) == ("S" * 8 + "LL") * 2
    assert ts.view().protected_fraction == 1.0


def test_n_is_linear_in_the_protected_fraction() -> None:
    ts = TemporalScheduler(RotationConfig(n_min=2, n_max=8))
    ts.add(_sig(0, PathClass.SHORT, protected=True))
    ts.add(_sig(1, PathClass.SHORT))
    view = ts.view()
    assert view.protected_fraction == 0.5 and view.n == 2 + round(0.5 * 6)


def test_short_phase_hides_ordinary_long_prefills_only() -> None:
    ts = TemporalScheduler(RotationConfig())
    ts.add(_sig(1, PathClass.LONG))
    ts.add(_sig(2, PathClass.LONG, protected=True))
    ts.add(_sig(3, PathClass.SHORT))
    view = ts.view()
    assert view.phase is PathClass.SHORT and view.hidden == frozenset({1})


def test_long_phase_hides_ordinary_short_prefills() -> None:
    ts = TemporalScheduler(RotationConfig())
    ts.add(_sig(1, PathClass.LONG))
    ts.add(_sig(3, PathClass.SHORT))
    ts.add(_sig(4, PathClass.LONG, protected=True))
    ts.view(), ts.view()
    view = ts.view()
    assert view.phase is PathClass.LONG and view.hidden == frozenset({3})


def test_long_cap_keeps_the_earliest_deadlines_and_exempts_protected() -> None:
    ts = TemporalScheduler(RotationConfig(long_cap=2))
    for rid, d in [(1, 30.0), (2, 10.0), (3, 20.0), (4, 5.0), (5, 40.0)]:
        ts.add(_sig(rid, PathClass.LONG, deadline=d))
    ts.add(_sig(9, PathClass.LONG, deadline=1.0, protected=True))
    ts.view(), ts.view()
    view = ts.view()  # a long phase: 4 and 2 have the earliest deadlines; 9 is exempt
    assert view.phase is PathClass.LONG and view.hidden == frozenset({1, 3, 5}) and view.capped == 3
    ts.admitted([4, 2, 9])  # two ordinary long-path requests occupy the slots (9 does not count)
    view = ts.view()
    assert view.phase is PathClass.LONG and view.hidden == frozenset({1, 3, 5})
    ts.finished(4)  # a slot frees: the next earliest deadline becomes visible
    ts.view(), ts.view()
    view = ts.view()
    assert view.phase is PathClass.LONG and view.hidden == frozenset({1, 5})


def test_rotation_off_hides_nothing_but_the_cap() -> None:
    ts = TemporalScheduler(RotationConfig(rotate=False, long_cap=1))
    ts.add(_sig(1, PathClass.LONG, deadline=5.0))
    ts.add(_sig(2, PathClass.LONG, deadline=6.0))
    ts.add(_sig(3, PathClass.SHORT))
    assert [ts.view().hidden for _ in range(4)] == [frozenset({2})] * 4
    ts2 = TemporalScheduler(RotationConfig(rotate=False, cap_long=False))
    ts2.add(_sig(1, PathClass.LONG))
    assert ts2.view().hidden == frozenset()


def test_timers_protect_waiting_requests_and_admission_forgets_them() -> None:
    ts = TemporalScheduler(RotationConfig())
    ts.add(_sig(1, PathClass.LONG, protect_at=5.0))
    ts.add(_sig(2, PathClass.SHORT, protect_at=50.0))  # short-path work: the phase hides 1
    ts.refresh(4.9)
    assert not ts.is_protected(1) and ts.view().hidden == frozenset({1})
    ts.refresh(5.1)
    assert ts.is_protected(1) and ts.view().hidden == frozenset()
    ts.admitted([1, 2])
    ts.finished(1)
    assert ts.waiting() == 0


def test_bad_rotation_config_is_refused() -> None:
    with pytest.raises(ValueError, match="n_min"):
        RotationConfig(n_min=5, n_max=2)
    with pytest.raises(ValueError, match="m must"):
        RotationConfig(m=0)
    with pytest.raises(ValueError, match="long_cap"):
        RotationConfig(long_cap=0)
    assert RotationConfig().min_long_share == pytest.approx(0.2)


def test_a_request_cannot_arrive_twice() -> None:
    ts = TemporalScheduler()
    ts.add(_sig(1, PathClass.SHORT))
    with pytest.raises(ValueError, match="twice"):
        ts.add(_sig(1, PathClass.SHORT))


def test_one_short_request_alone_is_never_hidden_when_conserving() -> None:
    """The issue's measurement: one short request, no long-path work. The unconditional
    variant hides it in the 2 long-path steps of every 4; the work-conserving one never does."""
    for conserve, expected in ((True, 0), (False, 6)):
        ts = TemporalScheduler(RotationConfig(conserve=conserve))
        ts.add(_sig(1, PathClass.SHORT))
        assert sum(1 in ts.view().hidden for _ in range(12)) == expected


def test_long_phase_without_visible_long_work_hides_no_short_prefill() -> None:
    ts = TemporalScheduler(RotationConfig(long_cap=1))
    ts.add(_sig(1, PathClass.LONG, deadline=5.0))
    ts.admitted([1])  # the cap is full: the next long-path prefill is hidden by the cap
    ts.add(_sig(2, PathClass.LONG, deadline=6.0))
    ts.add(_sig(3, PathClass.SHORT))
    views = [ts.view() for _ in range(4)]
    assert [v.phase for v in views] == [PathClass.SHORT] * 2 + [PathClass.LONG] * 2
    assert all(v.hidden == frozenset({2}) for v in views)  # short 3 is never hidden


ops = st.lists(st.tuples(st.sampled_from(["add", "admit", "finish", "view", "protect"]),
                         st.sampled_from([PathClass.SHORT, PathClass.LONG]), st.booleans(),
                         st.integers(0, 30)), min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(ops=ops, long_cap=st.integers(1, 3))
def test_rotation_hides_only_while_the_phase_has_visible_work(
        ops: list[tuple[str, PathClass, bool, int]], long_cap: int) -> None:
    """Work conservation as a property: in every view, a non-phase ordinary prefill is hidden by
    rotation only while a waiting request of the phase's path is visible; with nothing hidden
    by rotation, only the long-path cap hides (and then only ordinary long-path requests)."""
    ts = TemporalScheduler(RotationConfig(long_cap=long_cap))
    path: dict[int, PathClass] = {}
    waiting: set[int] = set()
    nxt = 0
    for op, p, protected, k in ops:
        if op == "add":
            ts.add(_sig(nxt, p, deadline=float(k), protect_at=float(k) / 2, protected=protected))
            path[nxt] = p
            waiting.add(nxt)
            nxt += 1
        elif op == "admit" and waiting:
            rid = sorted(waiting)[k % len(waiting)]
            ts.admitted([rid])
            waiting.discard(rid)
        elif op == "finish" and path:
            rid = sorted(path)[k % len(path)]
            ts.finished(rid)
            waiting.discard(rid)
            del path[rid]
        elif op == "protect":
            ts.refresh(float(k))
        else:
            view = ts.view()
            visible = waiting - view.hidden
            other = PathClass.LONG if view.phase is PathClass.SHORT else PathClass.SHORT
            by_rotation = {r for r in view.hidden if path[r] is other}
            if view.phase is PathClass.LONG:
                if by_rotation:
                    assert any(path[r] is PathClass.LONG for r in visible)
            else:
                rotation_hid = len(view.hidden) > view.capped
                if rotation_hid:
                    assert any(path[r] is PathClass.SHORT for r in visible)
            assert all(not ts.is_protected(r) for r in view.hidden)
