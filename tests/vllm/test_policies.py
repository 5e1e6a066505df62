"""The policy factory."""

from __future__ import annotations

import pytest

from omniplane.sim.policy import FCFS
from omniplane.vllm.policies import PolicyInputs, PolicyUnavailable, make_policy
from omniplane.vllm.settings import load_settings
from tests.vllm.policies import HideEveryOther

INPUTS = PolicyInputs.from_settings(load_settings({"omniplane": {"total_sms": 132}}), (8, 16))


def test_names() -> None:
    assert isinstance(make_policy("fcfs", INPUTS), FCFS)
    p = make_policy("import:tests.vllm.policies:HideEveryOther", INPUTS)
    assert isinstance(p, HideEveryOther) and p.inputs.total_sms == 132 and p.inputs.ladder == (8, 16)
    assert INPUTS.classes["audio"] == ("long", None)


def test_horizon_is_a_marked_place_until_issue_7() -> None:
    with pytest.raises(PolicyUnavailable, match="horizon"):
        make_policy("horizon", INPUTS)


@pytest.mark.parametrize(
    ("name", "msg"),
    [
        ("edf2", "unknown policy"),
        ("import:nomodule", "expected 'import"),
        ("import:tests.vllm.policies:Nope", "cannot load"),
    ],
)
def test_bad_names(name: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        make_policy(name, INPUTS)
