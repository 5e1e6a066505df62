"""SM ladders: partition rules per architecture, ladder construction, snapping a cap to a level."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniplane.sched.ladder import LadderSpec, PartitionRule, build_ladder, partition_rule


@pytest.mark.parametrize(
    ("cc", "rule"),
    [
        ((6, 1), (1, 1)),
        ((7, 5), (2, 2)),
        ((8, 0), (4, 2)),
        ((8, 9), (4, 2)),
        ((9, 0), (8, 8)),
        ((12, 0), (8, 8)),
    ],
)
def test_documented_partition_rules(cc: tuple[int, int], rule: tuple[int, int]) -> None:
    r = partition_rule(*cc)
    assert (r.min_sms, r.align) == rule
    assert "GREEN__CONTEXTS" in r.source


def test_old_architectures_are_refused() -> None:
    with pytest.raises(ValueError, match=r"6\.0 or newer"):
        partition_rule(5, 2)


def test_default_h200_ladder_and_complements() -> None:
    lad = build_ladder(132, partition_rule(9, 0))
    assert lad.levels == tuple(range(8, 121, 8))
    assert all(s + lad.complement(i) == 132 for i, s in enumerate(lad.levels))
    assert lad.to_json()["complement"][0] == 124


def test_explicit_levels_snap_up_and_bounds_are_checked() -> None:
    rule = partition_rule(9, 0)
    assert build_ladder(132, rule, LadderSpec(levels=(60, 64, 70))).levels == (64, 72)
    with pytest.raises(ValueError, match="leave fewer than 8"):
        build_ladder(132, rule, LadderSpec(levels=(128,)))
    with pytest.raises(ValueError, match="two partitions"):
        build_ladder(12, rule)
    with pytest.raises(ValueError, match="s_min"):
        LadderSpec(s_min=0)


@given(
    st.integers(16, 200),
    st.sampled_from([(1, 1), (2, 2), (4, 2), (8, 8)]),
    st.one_of(st.none(), st.integers(0, 260)),
)
def test_level_for_never_exceeds_the_cap_unless_below_the_ladder(
    total: int, rule: tuple[int, int], cap: int | None
) -> None:
    r = PartitionRule(*rule)
    if total < 2 * r.min_sms + r.align:
        return
    lad = build_ladder(total, r)
    level = lad.level_for(cap)
    if cap is None or cap >= total:
        assert level is None
        return
    assert level is not None
    s = lad.levels[level]
    assert r.valid(s)
    if cap >= lad.levels[0]:
        assert s <= cap and all(x <= s or x > cap for x in lad.levels)
    else:
        assert level == 0
