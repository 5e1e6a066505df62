"""The open-loop throughput metrics (omniplane.fidelity.throughput) and the wrapper's cost
against the bare run of the same repeat (omniplane.fidelity.schedlive.wrapper_cost)."""

from __future__ import annotations

from typing import Any

import pytest

from omniplane.fidelity.compare import Timing, summarize
from omniplane.fidelity.schedlive import wrapper_cost
from omniplane.fidelity.throughput import throughput, tokens_in


def _stream(n: int, held: int = 0) -> tuple[list[Timing], list[float]]:
    """``n`` requests sent 1 s apart, each 10 tokens from 0.1 s to 0.55 s after its send; the
    last ``held`` requests are held 3 s longer (a policy's deliberate hold)."""
    sent = [float(i) for i in range(n)]
    out = []
    for i, s in enumerate(sent):
        d = 3.0 if i >= n - held else 0.0
        out.append(Timing(s, s + 0.1 + d, s + 0.55 + d, 10))
    return out, sent


def test_tokens_are_counted_in_a_half_open_window() -> None:
    t = Timing(0.0, 1.0, 2.0, 5)  # tokens at 1.0, 1.25, 1.5, 1.75, 2.0
    assert tokens_in(t, 0.0, 1.5) == 2
    assert tokens_in(t, 1.5, 3.0) == 3
    assert tokens_in(t, 0.0, 1.0) == 0
    assert tokens_in(t, 2.5, 3.0) == 0
    assert sum(tokens_in(t, a, a + 0.3) for a in (0.9, 1.2, 1.5, 1.8)) == 5  # disjoint windows partition
    assert tokens_in(Timing(0.0, 1.0, 1.0, 1), 0.5, 1.5) == 1
    assert tokens_in(Timing(0.0, 1.0, 1.0, 3), 0.5, 1.5) == 3  # every token in one chunk
    assert tokens_in(Timing(0.0, 1.0, 1.0, 0), 0.0, 9.0) == 0


def test_span_is_the_existing_metric_and_a_held_tail_only_moves_it() -> None:
    plain, sent = _stream(101)
    held, _ = _stream(101, held=3)
    a, b = throughput(plain, sent), throughput(held, sent)
    assert a["span_rps"] == pytest.approx(summarize(plain)["throughput_rps"])
    assert b["span_rps"] == pytest.approx(summarize(held)["throughput_rps"])
    assert b["span_rps"] < a["span_rps"]  # the hold at the end reads as lost throughput here
    assert b["steady_tokens_per_s"] == a["steady_tokens_per_s"]  # but not in the steady middle
    # the arrival window counts what finished by the last send: the held last three are late
    assert a["window_rps"] == pytest.approx(100 / 100)  # request 100 finishes after the last send
    assert b["window_rps"] == pytest.approx(98 / 100)
    assert a["offered_rps"] == pytest.approx(1.0)
    assert a["steady_window_s"] == pytest.approx(80.0)
    assert a["steady_tokens_per_s"] == pytest.approx(10.0, rel=0.02)  # 10 tokens per second sent


def test_a_slower_engine_shows_in_every_metric() -> None:
    fast, sent = _stream(101)
    slow = [Timing(t.start, t.start + 0.1 + 0.02 * i, t.start + 0.55 + 0.02 * i, 10)
            for i, t in enumerate(fast)]  # a queue that grows through the run
    a, b = throughput(fast, sent), throughput(slow, sent)
    for k in ("span_rps", "window_rps", "steady_tokens_per_s"):
        assert b[k] < a[k], k


def test_nothing_sent_or_completed_gives_none_and_bad_trim_is_refused() -> None:
    assert set(throughput([], []).values()) == {None}
    r = throughput([], [0.0, 1.0])
    assert r["span_rps"] is None and r["window_rps"] == 0.0 and r["steady_tokens_per_s"] == 0.0
    with pytest.raises(ValueError, match="trim"):
        throughput([], [0.0, 1.0], trim=0.5)


def _run(policy: str, repeat: int, span: float, cap: float | None) -> dict[str, Any]:
    tp = {"span_rps": span, "window_rps": 2 * span, "steady_tokens_per_s": 10 * span}
    return {"policy": policy, "repeat": repeat, "capacity_rps": cap, "streams": {"s": {"throughput": tp}},
            "capacity_tokens_per_s": None if cap is None else 100 * cap}


def test_the_wrapper_cost_compares_with_the_bare_run_of_the_same_repeat() -> None:
    runs = [_run("bare", 0, 10.0, 20.0), _run("fcfs", 0, 9.0, 19.0), _run("horizon", 0, 11.0, None),
            _run("bare", 1, 5.0, 10.0), _run("fcfs", 1, 5.0, 11.0), _run("fcfs", 2, 1.0, 1.0)]
    cost = wrapper_cost(runs)
    assert [(c["policy"], c["repeat"]) for c in cost] == [("fcfs", 0), ("horizon", 0), ("fcfs", 1)]
    assert cost[0]["streams"]["s"] == pytest.approx(
        {"span_rps": -0.1, "window_rps": -0.1, "steady_tokens_per_s": -0.1})
    assert cost[0]["capacity"] == pytest.approx(-0.05) and cost[0]["capacity_tokens"] == pytest.approx(-0.05)
    assert cost[1]["capacity"] is None  # not measured
    assert cost[2]["streams"]["s"]["span_rps"] == pytest.approx(0.0)
    assert cost[2]["capacity"] == pytest.approx(0.1)
