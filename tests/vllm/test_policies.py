"""The policy factory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omniplane.policy import FCFS, PathClass, SeqInfo, StepContext, StepDecision
from omniplane.sched.factory import ALIASES, POLICIES, SIMULATOR_ONLY, canonical
from omniplane.sched.horizon import HorizonServe
from omniplane.sched.ladder import Ladder, LadderSpec, build_ladder, partition_rule
from omniplane.vllm.policies import PolicyInputs, scheduler_policy
from omniplane.vllm.settings import load_settings
from tests.vllm.policies import POLICY_PREFIX, HideEveryOther


def ladder(*levels: int) -> Ladder:
    return build_ladder(132, partition_rule(9, 0), LadderSpec(levels=levels))


INPUTS = PolicyInputs.from_settings(load_settings({"omniplane": {"total_sms": 132}}), ladder(8, 16))


def test_names() -> None:
    assert isinstance(scheduler_policy("fcfs", INPUTS), FCFS)
    p = scheduler_policy(POLICY_PREFIX + "HideEveryOther", INPUTS)
    assert isinstance(p, HideEveryOther) and p.inputs.total_sms == 132 and p.inputs.ladder == ladder(8, 16)
    assert INPUTS.classes["audio"] == ("long", None)


TABLE = {"omniplane": {"total_sms": 132, "slo_table": {
    "kind": "omniplane-slo-table", "source": "assumption: test table",
    "classes": {"text": {"priority": 0, "path": "short", "slo_s": 0.5},
                "audio": {"priority": 10, "path": "long", "slo_s": 5.0},
                "image": {"priority": 20, "path": "long"}}}}}


def horizon(options: dict[str, Any] | None = None, levels: tuple[int, ...] = (40, 56, 64)) -> HorizonServe:
    settings = load_settings({"omniplane": {**TABLE["omniplane"], "policy_options": options or {}}})
    lad = ladder(*levels) if levels else None
    policy = scheduler_policy("horizon", PolicyInputs.from_settings(settings, lad))
    assert isinstance(policy, HorizonServe)
    return policy


def test_horizon_takes_paths_and_slos_from_the_settings() -> None:
    p = horizon()
    prof = p.profiler.profiles
    assert {c: (q.path, q.slo_s) for c, q in prof.items()} == {
        "text": (PathClass.SHORT, 0.5), "audio": (PathClass.LONG, 5.0), "image": (PathClass.LONG, 5.0)}
    # without a measured profile a waiting request's r_hat is the solo p95 behind the SLO (SLO / 5)
    info = SeqInfo(0, "text", 10.0, 100, 0, 20, 0)
    assert p.profiler.r_hat(info) == pytest.approx(0.1)
    sig = p.profiler.annotate(SeqInfo(1, "image", 10.0, 100, 0, 20, 0), 10.0)
    # no SLO: the table's most lenient deadline, so the class ages into protection
    assert sig.deadline == pytest.approx(15.0) and not sig.protected
    assert p.spatial.ladder.levels == (40, 56, 64) and p.spatial.ladder.s_aggr == 132


def ctx(downstream: int, waiting: tuple[SeqInfo, ...] = ()) -> StepContext:
    return StepContext(1.0, 0, waiting, (), downstream, 0.5, 132)


@pytest.mark.parametrize("name", [*(p for p in POLICIES if p not in SIMULATOR_ONLY), *ALIASES])
def test_every_factory_name_is_a_vllm_policy(name: str) -> None:
    """One factory for the simulator and vLLM: every name but the simulator-only ones builds
    inside vLLM too."""
    settings = load_settings(TABLE)
    p = scheduler_policy(name, PolicyInputs.from_settings(settings, ladder(40, 56, 64)))
    assert p.name == canonical(name)
    reqs = (SeqInfo(0, "image", 0.0, 50, 0, 20, 0), SeqInfo(1, "audio", 0.5, 50, 0, 20, 0),
            SeqInfo(2, "text", 1.0, 50, 0, 20, 0))
    for r in reqs:
        p.on_arrival(r, r.arrival)
    d = p.decide(ctx(1, reqs))
    if name in ("edf", "edf-mps", "edf-split"):
        # deadlines 1.5 (text), 5.5 (audio); image has no SLO: the most lenient one, 0 + 5.0
        assert d.order == (2, 0, 1)
    if name in ("vanilla", "fcfs", "mps"):
        assert d == StepDecision()


def test_horizon_caps_the_shared_stage_on_the_ladder_while_downstream_runs() -> None:
    p = horizon()
    assert p.decide(ctx(0)).sm_cap == 132  # S_aggr: the whole GPU
    assert p.decide(ctx(2)).sm_cap in (40, 56, 64)
    assert horizon(levels=()).decide(ctx(2)).sm_cap is None  # no SM control on this GPU
    assert horizon({"throttle": False}).decide(ctx(2)).sm_cap is None


def test_horizon_rotates_paths() -> None:
    p = horizon()
    text, audio = SeqInfo(0, "text", 1.0, 50, 0, 20, 0), SeqInfo(1, "audio", 1.0, 50, 0, 20, 0)
    for s in (text, audio):
        p.on_arrival(s, 1.0)
    hidden = [p.decide(ctx(0, (text, audio))).hidden for _ in range(4)]
    assert hidden == [frozenset({1}), frozenset({1}), frozenset({0}), frozenset({0})]  # N = 2, M = 2


def test_horizon_options_and_measured_profiles(tmp_path: Path) -> None:
    p = horizon({"u_guard": 2.0, "n_max": 6, "gamma": 0.2, "long_cap": 1,
                 "profiles": {"text": {"prefill_s_per_token": 0.001, "step_s": 0.02}}})
    assert p.config.profiler.u_guard == 2.0 and p.config.rotation.n_max == 6
    assert p.config.spatial.gamma == 0.2 and p.config.rotation.long_cap == 1
    assert p.profiler.r_hat(SeqInfo(0, "text", 0.0, 100, 0, 20, 0)) == pytest.approx(0.12)
    cal = tmp_path / "calibration.json"
    cal.write_text(json.dumps({"profiles": {"audio": {"step_s": 0.01, "decode_s_per_token": 0.02,
                                                      "decode_tokens": 50, "downstream_s": 0.3}}}))
    p = horizon({"calibration": str(cal)})
    assert p.profiler.r_hat(SeqInfo(0, "audio", 0.0, 10, 10, 60, 0)) == pytest.approx(50 * 0.02 + 0.3)


@pytest.mark.parametrize(
    ("options", "msg"),
    [
        ({"u_gaurd": 2.0}, r"unknown option\(s\) \['u_gaurd'\]"),
        ({"u_guard": 0.5}, "u_guard must be >= 1"),
        ({"n_min": 5, "n_max": 3}, "n_min <= n_max"),
        ({"profiles": {"video": {}}}, r"unknown class\(es\) \['video'\]"),
        ({"profiles": {"text": {"step_s": -1}}}, r"profiles.text.step_s: expected a number >= 0"),
        ({"calibration": "/nonexistent/cal.json"}, "/nonexistent/cal.json: cannot read"),
        ({"slo_multiplier": 0}, "slo_multiplier must be > 0"),
    ],
)
def test_horizon_bad_options_name_the_field(options: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        horizon(options)


@pytest.mark.parametrize(
    ("name", "msg"),
    [
        ("edf2", "unknown policy"),
        ("import:nomodule", "expected 'import"),
        (POLICY_PREFIX + "Nope", "cannot load"),
    ],
)
def test_bad_names(name: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        scheduler_policy(name, INPUTS)


def test_static_cap_is_simulator_only() -> None:
    from omniplane.vllm.policies import NAMES

    assert SIMULATOR_ONLY == ("static-cap",)
    with pytest.raises(ValueError, match="unknown policy 'static-cap'"):
        scheduler_policy("static-cap", PolicyInputs.from_settings(load_settings(TABLE), ladder(40, 56, 64)))
    assert "static-cap" not in NAMES and "priority" in NAMES and "static-split" in NAMES
