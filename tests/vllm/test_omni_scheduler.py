"""omniplane's scheduler classes on vLLM-Omni's real schedulers (CPU, synthetic model outputs).

``OmniplaneOmniARScheduler`` / ``...AsyncScheduler`` wrap vLLM-Omni's ``OmniARScheduler`` /
``OmniARAsyncScheduler`` (thinker and talker stages), ``OmniplaneOmniGenerationScheduler`` its
``OmniGenerationScheduler`` (code2wav). The same checks as for vLLM's scheduler
(test_scheduler.py): hundreds of schedule()/update_from_output() cycles of mixed classes with a
small KV cache, hidden requests back in the queue after every step, vLLM-Omni admits only what
the policy left visible, every request finishes exactly once, an exception inside vLLM-Omni's
``schedule()`` loses nothing; and a shared thinker stage and a downstream code2wav stage
coupled through the real control record, requests handed from one to the other.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm_omni")
pytestmark = pytest.mark.omni

from vllm_omni.core.sched.omni_ar_scheduler import OmniARScheduler  # noqa: E402

from omniplane.control import ControlRecord  # noqa: E402
from omniplane.vllm.omni_scheduler import (  # noqa: E402
    OmniplaneOmniARAsyncScheduler,
    OmniplaneOmniARScheduler,
    OmniplaneOmniGenerationScheduler,
)
from tests.vllm import harness  # noqa: E402
from tests.vllm.policies import POLICY_PREFIX  # noqa: E402


def stage(cls: type, configs: dict[str, Any], policy: str, **extra: Any) -> Any:
    return harness.make_scheduler(cls, configs["fcfs"],
                                  {"policy": POLICY_PREFIX + policy, "sampler": "null", **extra})


@pytest.mark.parametrize("cls", [OmniplaneOmniARScheduler, OmniplaneOmniARAsyncScheduler])
def test_ar_stage_hundreds_of_cycles_finish_exactly_once(configs: dict[str, Any], cls: type) -> None:
    sched = stage(cls, configs, "HideEveryOther")
    assert isinstance(sched, OmniARScheduler)
    harness.check_hundreds_of_cycles(sched, seed=21)


def test_generation_stage_hundreds_of_cycles_finish_exactly_once(configs: dict[str, Any]) -> None:
    """code2wav: one-shot requests (vLLM-Omni's generation scheduler finishes each after its
    step), one arriving per step so that the run lasts hundreds of cycles."""
    sched = stage(OmniplaneOmniGenerationScheduler, configs, "HideEveryOther", role="downstream", slot=1)
    rng = random.Random(22)
    trace = {i: [harness.make_request(i, rng)] for i in range(240)}
    hiding = []

    def after(s: Any, step: int, out: Any, snap: dict[str, list[str]]) -> None:
        harness.check_view(s, step, out, snap)
        hiding.append(bool(s.omniplane.last_hidden))

    steps = harness.run(sched, trace, after=after)
    policy = sched.omniplane.bridge.policy
    assert steps >= 240 and not sched.has_requests()
    assert len(policy.arrivals) == 240 and policy.finishes == policy.arrivals
    assert sum(hiding) >= 20


def test_fcfs_wrapper_schedules_exactly_like_bare_omni_ar(configs: dict[str, Any]) -> None:
    bare = harness.make_scheduler(OmniARScheduler, configs["fcfs"], None)
    ours = stage(OmniplaneOmniARScheduler, configs, "Recording")
    harness.check_fcfs_is_the_bare_scheduler(bare, ours, seed=23)


@pytest.mark.parametrize("cls", [OmniplaneOmniARScheduler, OmniplaneOmniGenerationScheduler])
def test_exception_inside_omni_schedule_loses_nothing(configs: dict[str, Any], cls: type) -> None:
    sched = stage(cls, configs, "HideEveryOther")
    harness.check_exception_in_schedule_loses_nothing(sched, seed=24, warmup=1)


def test_thinker_and_code2wav_stages_coupled_through_the_control_record(
    configs: dict[str, Any], tmp_path: Path, reading_sampler: Any
) -> None:
    """HorizonServe's setting on vLLM-Omni's schedulers: the thinker stage (shared, ``horizon``)
    and a code2wav stage (downstream, FCFS) share one control record. Every long-path (audio,
    image) request the thinker finishes is handed to the code2wav stage, as vLLM-Omni's
    orchestrator does; the thinker's policy sees that stage's activity, caps its SMs to a ladder
    level while the downstream stage is active and takes the whole GPU otherwise; every request
    finishes once in each stage it visits."""
    control = {"control": "omni-pair", "control_dir": str(tmp_path), "control_slots": 2, "total_sms": 132}
    thinker = stage(
        OmniplaneOmniARScheduler,
        configs,
        "WatchedHorizon",
        slo_table=harness.HORIZON_SLO_TABLE,
        ladder={"s_min": 40, "s_max": 64},
        **control,
    )
    code2wav = stage(
        OmniplaneOmniGenerationScheduler, configs, "Recording", role="downstream", slot=1, **control
    )
    record = ControlRecord.open("omni-pair", slots=2, directory=tmp_path, create=False)
    rng = random.Random(25)
    trace = harness.arrivals(90, seed=26)
    handed: list[str] = []
    seen: list[tuple[int, int | None, int]] = []
    pending: dict[str, int] = {}
    step = 0
    while step < 3000 and (step <= max(trace) or thinker.has_requests() or code2wav.has_requests()):
        for r in trace.get(step, []):
            thinker.add_request(r)
            pending[r.request_id] = r.priority
        out = thinker.schedule()
        state = record.read(0)
        assert state is not None
        seen.append((thinker.omniplane.bridge.policy.downstream[-1], state.sm_level, state.sm_count))
        thinker.update_from_output(out, harness.synthetic_output(thinker, out, rng))
        for rid in list(pending):
            if rid not in thinker.requests and pending[rid] != 0:  # finished a long-path request
                code2wav.add_request(harness.make_request(1000 + len(handed), rng, priority=pending[rid]))
                handed.append(rid)
            if rid not in thinker.requests:
                del pending[rid]
        if step % 3 == 0:  # the code2wav stage steps at its own pace
            gout = code2wav.schedule()
            code2wav.update_from_output(gout, harness.synthetic_output(code2wav, gout, rng))
        step += 1
    hz, down = thinker.omniplane.bridge.policy, code2wav.omniplane.bridge.policy
    assert not thinker.has_requests() and not code2wav.has_requests()
    assert len(hz.finishes) == 90 and set(hz.finishes.values()) == {1}
    assert handed and len(down.finishes) == len(handed) and set(down.finishes.values()) == {1}
    co = [(lvl, sms) for active, lvl, sms in seen if active]
    alone = [(lvl, sms) for active, lvl, sms in seen if not active]
    assert co, "the code2wav stage never reported activity to the thinker"
    assert alone
    assert all(lvl is not None and sms in (40, 48, 56, 64) for lvl, sms in co)
    assert all(lvl is None for lvl, _ in alone)  # S_aggr: the whole GPU
    slot = record.read(1)
    assert slot is not None and slot.active == 0 and time.monotonic_ns() - slot.updated_ns < 60e9
    record.close()
