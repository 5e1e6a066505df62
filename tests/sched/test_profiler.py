"""The request profiler: deadlines, remaining-slack ratio, protected bit (section 4.2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniplane.policy import PathClass, SeqInfo
from omniplane.sched.profiler import ClassProfile, ProfilerConfig, RequestProfiler
from tests.sched.helpers import LONG, PROFILES, SHORT


def _info(cls: str, arrival: float = 1.0, prompt: int = 100, computed: int = 0,
          generated: int = 0) -> SeqInfo:
    return SeqInfo(7, cls, arrival, prompt, computed, 50, generated)


def test_deadline_is_arrival_plus_the_class_slo() -> None:
    sig = RequestProfiler(PROFILES).annotate(_info("speech", arrival=3.0), now=3.5)
    assert sig.deadline == pytest.approx(3.0 + LONG.slo_s)
    assert sig.path is PathClass.LONG and sig.cls == "speech"


def test_slack_ratio_is_time_left_over_remaining_estimate() -> None:
    prof = RequestProfiler(PROFILES)
    info = _info("text", arrival=0.0, prompt=200)
    r_hat = SHORT.step_s + 200 * SHORT.prefill_s_per_token
    assert prof.r_hat(info) == pytest.approx(r_hat)
    assert prof.slack(info, 0.05) == pytest.approx((SHORT.slo_s - 0.05) / r_hat)


def test_progress_shrinks_the_remaining_estimate() -> None:
    prof = RequestProfiler(PROFILES)
    fresh = prof.r_hat(_info("speech"))
    prefilled = prof.r_hat(_info("speech", computed=100, generated=1))
    halfway = prof.r_hat(_info("speech", computed=100, generated=25))
    assert fresh > prefilled > halfway > LONG.downstream_s
    # downstream steps remain after the shared stage is done
    assert prof.r_hat(_info("speech", computed=100, generated=50)) == pytest.approx(LONG.downstream_s)


def test_short_path_estimate_ends_at_the_first_token() -> None:
    prof = RequestProfiler(PROFILES)
    assert prof.r_hat(_info("text", computed=100, generated=1)) <= 1e-6


@given(arrival=st.floats(0, 100), wait=st.floats(0, 30), prompt=st.integers(1, 4000),
       cls=st.sampled_from(["text", "speech"]), guard=st.floats(1.0, 4.0))
def test_protect_at_is_exactly_when_slack_falls_below_the_guard(arrival: float, wait: float, prompt: int,
                                                                cls: str, guard: float) -> None:
    prof = RequestProfiler(PROFILES, ProfilerConfig(u_guard=guard))
    info = _info(cls, arrival=arrival, prompt=prompt)
    now = arrival + wait
    sig = prof.annotate(info, arrival)
    u = prof.slack(info, now)
    if abs(now - sig.protect_at) > 1e-9 * max(1.0, abs(now)):
        assert (u < guard) == (now > sig.protect_at)
    assert prof.annotate(info, now).protected == (u < guard)


def test_unknown_class_and_bad_config_are_refused() -> None:
    with pytest.raises(KeyError, match="unknown request class 'image'"):
        RequestProfiler(PROFILES).annotate(_info("image"), 0.0)
    with pytest.raises(ValueError, match="u_guard"):
        ProfilerConfig(u_guard=0.5)
    with pytest.raises(ValueError, match="slo_s"):
        ClassProfile("x", PathClass.SHORT, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        RequestProfiler({})
