"""The one ``--slo`` syntax (``omniplane.spec.parse_slo``) and its errors."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.cli.slo import legacy_plan_policy, legacy_solo_policy
from omniplane.spec import IsolatedPercentileSLO, SoloMultiplierSLO, parse_slo
from omniplane.spec.slo import describe

TYPES = ["ti2t", "ti2a"]


@pytest.mark.parametrize(("text", "base"), [
    ("isolated p25", IsolatedPercentileSLO()),
    ("isolated", IsolatedPercentileSLO()),
    ("2x isolated p10", IsolatedPercentileSLO(percentile=10, multiplier=2)),
    ("5x solo p95", SoloMultiplierSLO()),
    ("solo", SoloMultiplierSLO()),
    ("1xsolo:p90", SoloMultiplierSLO(multiplier=1, percentile=90)),
    ("1.5x-solo-p99", SoloMultiplierSLO(multiplier=1.5, percentile=99)),
    ("plan", "plan"),
    ("Workload", "workload"),
])
def test_policies_and_keywords(text: str, base: object) -> None:
    got = parse_slo(text, TYPES)
    assert got.base == base and dict(got.targets_ms) == {}
    if not isinstance(base, str):  # the printed form reads back as the same policy
        assert parse_slo(describe(got.base), TYPES).base == base  # type: ignore[arg-type]


def test_a_users_table_in_milliseconds_and_seconds_with_a_base() -> None:
    got = parse_slo("plan, ti2t=800ms, ti2a=1.5s", TYPES)
    assert got.base == "plan" and dict(got.targets_ms) == {"ti2t": 800.0, "ti2a": 1500.0}
    assert dict(parse_slo(["ti2t=.25s", "ti2a=3e3ms"], TYPES).targets_ms) == {"ti2t": 250.0, "ti2a": 3000.0}
    assert parse_slo("", TYPES).base is None and parse_slo([], TYPES).targets_ms == {}


@pytest.mark.parametrize(("text", "msg"), [
    ("zz=1s", "--slo 'zz=1s': unknown request type 'zz' (expected one of: ti2t, ti2a)"),
    ("ti2t=250", "--slo 'ti2t=250': '250' needs a unit: 250ms or 250s"),
    ("ti2t=fast", "--slo 'ti2t=fast': expected a duration such as 800ms or 3s, got 'fast'"),
    ("ti2t=0s", "--slo 'ti2t=0s': the target must be positive"),
    ("ti2t=1s,ti2t=2s", "--slo 'ti2t=2s': ti2t is given twice"),
    ("solo, isolated", "--slo 'isolated': a second policy after '5x solo p95'; give only one"),
    ("solo p100", "the percentile must be between 0 and 100"),
    ("0x solo", "the multiplier must be positive"),
    ("p95", "--slo 'p95': expected TYPE=DURATION items"),
])
def test_errors_name_the_option_the_item_and_what_was_expected(text: str, msg: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_slo(text, TYPES)
    assert msg in str(exc.value)


def test_the_older_spellings_read_as_the_same_policy() -> None:
    assert legacy_solo_policy(1.0, None) == parse_slo("1x solo p95").base
    assert legacy_solo_policy(None, 90) == SoloMultiplierSLO(multiplier=1, percentile=90)
    assert legacy_solo_policy(None, None) is None
    base = IsolatedPercentileSLO()
    assert legacy_plan_policy(base, "solo_multiplier", None, 3) == parse_slo("3x solo p95").base
    assert legacy_plan_policy(base, None, 10, None) == parse_slo("isolated p10").base


def test_the_cli_refuses_two_policies_from_both_spellings() -> None:
    res = CliRunner().invoke(app, ["plan", "--model", "qwen3-vl", "--gpus", "2", "--slo", "solo",
                                   "--slo-policy", "isolated_percentile"])
    assert res.exit_code == 2 and "--slo names a policy and --slo-policy" in res.output
