"""The evidence of minimality at a target rate (omniplane.plan.inventory_minimal): one GPU fewer
of each kind, re-balanced by the flow balance and simulated; a descent while one still meets."""

from __future__ import annotations

import pytest

from omniplane.plan.inventory import Candidate, Option, size
from omniplane.plan.inventory_minimal import descend, one_fewer

OPTS = (Option("A", 1, 32, 0.1), Option("B", 1, 32, 0.05))  # thinker on A, talker on B
PRICE = {"A": 10.0, "B": 3.0}


def _pick(rate: float) -> Candidate:
    sized = size(OPTS, {"A": 8, "B": 16}, rate)
    assert sized is not None
    return Candidate((frozenset({"thinker"}), frozenset({"talker"})), OPTS, sized[0], sized[1])


def _resize(c: Candidate, budget: dict[str, int]) -> Candidate | None:
    sized = size(c.options, budget)
    return None if sized is None else Candidate(c.nodes, c.options, sized[0], sized[1])


def _run(need: dict[str, int], log: list[dict[str, int]]):  # type: ignore[no-untyped-def]
    """A stand-in simulator: every type meets iff each kind holds ``need`` GPUs."""
    def run(c: Candidate) -> None:
        used = c.gpus_by_kind()
        log.append(used)
        c.hourly = sum(PRICE[k] * n for k, n in used.items())
        ok = all(used.get(k, 0) >= n for k, n in need.items())
        c.attainment = {"t2t": 0.95, "ti2t": 0.95 if ok else 0.5}
        c.goodput, c.simulated_at = 1.0, 30.0
    return run


def test_a_flow_balance_that_over_sizes_is_descended_to_the_minimum_that_meets() -> None:
    pick = Candidate(_pick(30.0).nodes, OPTS, (5, 3), 50.0)  # e.g. leftovers: 2 A and 1 B more than 30 needs
    log: list[dict[str, int]] = []
    got, rows, dropped = descend(pick, 30.0, 0.9, ["t2t", "ti2t"], _run({"A": 3, "B": 2}, log), _resize)
    assert got.gpus_by_kind() == {"A": 3, "B": 2}  # without the descent the answer keeps 5 A and 3 B
    assert dropped == 3
    assert [r.kind for r in rows] == ["A", "B"]
    for r in rows:  # each row: one GPU fewer of its kind than the answer, simulated, and missing
        assert r.cand is not None and r.cand.gpus_by_kind()[r.kind] == got.gpus_by_kind()[r.kind] - 1
        assert r.misses == "ti2t" and r.attainment["ti2t"] < 0.9
        assert r.cand.simulated_at == 30.0


def test_a_row_whose_flow_balance_carries_less_than_the_rate_is_not_taken_though_it_met() -> None:
    # the simulated sample met with 2 A (a batch absorbing the excess while the sample lasts), but
    # 2 thinkers on A carry 20 req/s at full batch, their highest throughput: not 30
    pick = _pick(30.0)
    assert pick.gpus_by_kind() == {"A": 3, "B": 2}
    got, rows, dropped = descend(pick, 30.0, 0.9, ["t2t", "ti2t"], _run({"A": 2, "B": 2}, []), _resize)
    assert got is pick and dropped == 0
    row = rows[0]
    assert row.kind == "A" and row.misses is None and row.attainment["ti2t"] >= 0.9  # met on the sample
    assert row.short and not row.meets and "flow bound: carries 20.0 req/s < 30" in row.reason


def test_an_answer_already_minimal_is_kept_and_its_rows_miss() -> None:
    pick = _pick(30.0)
    got, rows, dropped = descend(pick, 30.0, 0.9, ["t2t", "ti2t"], _run({"A": 3, "B": 2}, []), _resize)
    assert got is pick and dropped == 0
    assert all(r.misses == "ti2t" for r in rows)
    assert "flow bound" in rows[0].reason  # 2 thinkers on A carry 20 req/s < 30


def test_a_kind_with_one_gpu_has_no_plan_with_one_fewer() -> None:
    pick = _pick(5.0)
    assert pick.gpus_by_kind() == {"A": 1, "B": 1}
    rows = one_fewer(pick, 5.0, 0.9, ["t2t"], _run({}, []), _resize)
    assert [r.cand for r in rows] == [None, None]
    assert all(r.reason.startswith("no plan") for r in rows)


@pytest.mark.parametrize("need", [{"A": 1, "B": 1}, {"A": 2, "B": 1}])
def test_the_descent_never_ends_on_an_answer_that_misses(need: dict[str, int]) -> None:
    pick, run = Candidate(_pick(30.0).nodes, OPTS, (5, 3), 50.0), _run(need, [])
    run(pick)  # the search's pick met before the descent
    got, rows, _ = descend(pick, 30.0, 0.9, ["t2t", "ti2t"], run, _resize)
    assert got.attainment and min(got.attainment.values()) >= 0.9  # a row that met was taken
    assert got.flow_rps >= 30.0  # and carried the rate
    assert not any(r.meets for r in rows)
