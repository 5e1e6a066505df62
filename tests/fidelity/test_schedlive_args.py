"""The live comparison's engine arguments per policy: vLLM's own scheduler for ``bare``, omniplane's
scheduler class with the policy, the class table and no GPU backends otherwise (``priority``
included); the settings load as the scheduler loads them."""

from __future__ import annotations

import pytest

from omniplane.fidelity.schedlive import SCHEDULER_CLS, scheduler_args
from omniplane.vllm.settings import load_settings

TABLE = {"kind": "omniplane-slo-table", "source": "assumption: test",
         "classes": {"text": {"priority": 0, "path": "short", "slo_s": 1.0},
                     "long": {"priority": 10, "path": "long", "slo_s": 4.0}}}


@pytest.mark.parametrize("policy", ["fcfs", "priority", "horizon"])
def test_wrapped_policies_load_as_the_scheduler_reads_them(policy: str) -> None:
    cls, extra = scheduler_args(policy, TABLE)
    assert cls == SCHEDULER_CLS and extra is not None
    s = load_settings(extra, {})
    assert s.policy == policy and s.class_source == "priority" and s.streams == "null"
    assert s.classes["long"].priority == 10


def test_bare_is_vllms_own_and_unknown_names_are_refused() -> None:
    assert scheduler_args("bare", TABLE) == (None, None)
    with pytest.raises(ValueError, match=r"unknown policy 'edf'.*priority"):
        scheduler_args("edf", TABLE)
