"""The HorizonServe policy object: Algorithm 1 over the three components."""

from __future__ import annotations

from omniplane.policy import SeqInfo, StepContext, StepOutcome
from omniplane.sched.horizon import HorizonConfig, HorizonServe
from omniplane.sched.temporal import RotationConfig
from tests.sched.helpers import LADDER, PROFILES


def _info(rid: int, cls: str, arrival: float = 0.0) -> SeqInfo:
    return SeqInfo(rid, cls, arrival, 100, 0, 10, 0)


def test_an_idle_stage_is_never_left_with_an_all_hidden_view() -> None:
    """Only long-path work waits and nothing runs: a short-path phase would hide it all, so the
    policy re-polls the rotation (as vLLM's engine loop would) and shows it."""
    pol = HorizonServe(PROFILES, LADDER)
    waiting = [_info(1, "speech"), _info(2, "speech")]
    for w in waiting:
        pol.on_arrival(w, 0.0)
    d = pol.decide(StepContext(0.0, 0, waiting, [], 0, 0.5, 142))
    assert not {1, 2} <= d.hidden


def test_a_running_stage_keeps_the_phase_filter_only_when_hiding_always() -> None:
    """A short-path phase with no short-path request waiting (one decodes): the work-conserving
    rotation shows the long-path prefill, the unconditional variant hides it."""
    running = [SeqInfo(9, "text", 0.0, 10, 10, 10, 3)]
    for conserve, hidden in ((True, frozenset()), (False, frozenset({1}))):
        cfg = HorizonConfig(rotation=RotationConfig(conserve=conserve))
        pol = HorizonServe(PROFILES, LADDER, cfg)
        waiting = [_info(1, "speech")]
        pol.on_arrival(waiting[0], 0.0)
        d = pol.decide(StepContext(0.0, 0, waiting, running, 0, 0.5, 142))
        assert d.hidden == hidden and d.order is None and d.sm_cap == LADDER.s_aggr


def test_history_records_each_step_and_admission_clears_the_queue() -> None:
    pol = HorizonServe(PROFILES, LADDER, record=True)
    pol.on_arrival(_info(1, "text"), 0.0)
    d = pol.decide(StepContext(0.0, 0, [_info(1, "text")], [], 2, 0.9, 142))
    assert d.sm_cap is not None and d.sm_cap <= LADDER.s_cap  # downstream active: on the ladder
    pol.on_step(StepOutcome(0.03, 0.03, (1,), (1,), d.sm_cap))
    assert pol.temporal.waiting() == 0
    pol.on_finish(1, 0.1)
    assert pol.history is not None and len(pol.history) == 1
    h = pol.history[0]
    assert h.downstream_active == 2 and h.spatial.co_running and h.view.hidden == frozenset()
