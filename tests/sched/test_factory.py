"""The policy factory and the EDF baseline."""

from __future__ import annotations

import pytest

from omniplane.policy import FCFS, SeqInfo, StepContext, StepOutcome
from omniplane.sched.baselines import EDF
from omniplane.sched.factory import ALIASES, POLICIES, canonical, make_policy
from omniplane.sched.horizon import HorizonServe
from tests.sched.helpers import LADDER, PROFILES


@pytest.mark.parametrize(("name", "kind", "mode"), [
    ("horizon", HorizonServe, "split"), ("vanilla", FCFS, "timeslice"), ("edf", EDF, "timeslice"),
    ("mps", FCFS, "mps"), ("edf-mps", EDF, "mps"), ("no-rotation", HorizonServe, "split"),
    ("no-sm-throttle", HorizonServe, "mps")])
def test_every_name_maps_to_a_policy_and_a_colocation_mode(name: str, kind: type, mode: str) -> None:
    policy, m = make_policy(name, PROFILES, LADDER)
    assert isinstance(policy, kind) and m == mode
    assert name in POLICIES and policy.name == name


def test_fcfs_is_vanillas_alias_and_edf_takes_each_class_slo() -> None:
    assert ALIASES == {"fcfs": "vanilla"} and canonical("fcfs") == "vanilla"
    fcfs, mode = make_policy("fcfs", PROFILES, LADDER)
    assert isinstance(fcfs, FCFS) and mode == "timeslice"
    edf, _ = make_policy("edf", PROFILES, LADDER)
    assert isinstance(edf, EDF) and edf.slo_s == {c: p.slo_s for c, p in PROFILES.items()}


def test_ablations_switch_off_exactly_their_mechanism() -> None:
    nr, _ = make_policy("no-rotation", PROFILES, LADDER)
    ns, _ = make_policy("no-sm-throttle", PROFILES, LADDER)
    assert isinstance(nr, HorizonServe) and isinstance(ns, HorizonServe)
    assert not nr.config.rotation.rotate and not nr.config.rotation.cap_long and nr.config.spatial.throttle
    assert ns.config.rotation.rotate and not ns.config.spatial.throttle


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy 'sjf'"):
        make_policy("sjf", PROFILES, LADDER)


def test_edf_orders_waiting_requests_by_deadline_and_forgets_admitted_ones() -> None:
    edf = EDF({"text": 0.5, "speech": 10.0})
    reqs = [SeqInfo(1, "speech", 0.0, 10, 0, 5, 0), SeqInfo(2, "text", 1.0, 10, 0, 5, 0),
            SeqInfo(3, "text", 0.2, 10, 0, 5, 0)]
    for r in reqs:
        edf.on_arrival(r, r.arrival)
    d = edf.decide(StepContext(1.0, 0, reqs, [], 0, 0.0, 142))
    assert d.order == (3, 2, 1) and d.hidden == frozenset() and d.sm_cap is None
    edf.on_step(StepOutcome(1.1, 0.1, (3,), (3,), None))
    assert edf.decide(StepContext(1.1, 1, reqs[:2], [], 0, 0.0, 142)).order == (2, 1)
    with pytest.raises(KeyError, match="no SLO"):
        edf.on_arrival(SeqInfo(4, "image", 0.0, 1, 0, 1, 0), 0.0)
