"""Tokens leave the front end per engine iteration (omniplane.fidelity.frontend.serve with a
grid of iteration ends): one output message per iteration, that iteration's tokens behind it in
arrival order. No engine needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omniplane.fidelity.engine import EngineConfig
from omniplane.fidelity.frontend import FrontEnd, on_grid, serve
from omniplane.fidelity.simulate import _simulate, iteration_ends
from omniplane.perf.steptime import StepModel
from omniplane.sim.metrics import ExecutorTrace
from omniplane.spec import load_model
from omniplane.workload import Request

DATA = Path(__file__).resolve().parents[2] / "src" / "omniplane" / "fidelity" / "data"


def test_a_burst_of_tokens_leaves_behind_its_message_in_arrival_order() -> None:
    fe = FrontEnd(0.0, per_token_s=0.001, per_iteration_s=0.004)
    grid = np.array([1.0, 2.0])
    # three requests decoding together: first tokens at 1 s, last at 2 s
    s = serve(fe, np.zeros(3), np.full(3, 10.0), np.ones(3), np.full(3, 2.0), np.array([2, 2, 2]),
              np.full(3, 3.0), grid)
    # at each instant: the message (4 ms), then the tokens 1 ms each; the message's own cost is
    # part of the zero-load constant, so the first stream waits for nothing, the third for two tokens
    assert s.first == pytest.approx([0.0, 0.001, 0.002])
    assert s.last == pytest.approx([0.0, 0.001, 0.002])
    assert s.busy_s == pytest.approx(2 * 0.004 + 6 * 0.001)  # two messages, six tokens
    # the old model (no grid) spreads the cost per token and never bunches the burst's tokens
    # behind a message: the same tokens, 1 + 4 / 3 ms each
    old = serve(fe, np.zeros(3), np.full(3, 10.0), np.ones(3), np.full(3, 2.0), np.array([2, 2, 2]),
                np.full(3, 3.0))
    assert old.busy_s == pytest.approx(6 * (0.001 + 0.004 / 3))
    assert old.first[2] == pytest.approx(2 * (0.001 + 0.004 / 3))


def test_on_grid_puts_one_token_per_iteration_and_spreads_a_preempted_request() -> None:
    grid = np.arange(1.0, 11.0)  # iteration ends at 1, 2, ..., 10 s
    first = np.array([2.0, 1.0, 3.0])
    finish = np.array([5.0, 10.0, np.inf])  # the third never finished
    counts = np.array([4, 4, 3])
    out = on_grid(grid, first, finish, counts)
    assert out[:4] == pytest.approx([2.0, 3.0, 4.0, 5.0])  # one token per iteration
    assert out[4:8] == pytest.approx([1.0, 4.0, 7.0, 10.0])  # 10 iterations, 4 tokens: a gap, spread
    assert out[8] == 3.0 and np.all(np.isinf(out[9:]))  # unfinished: its own times, kept
    # a time off the grid (the span split is approximate) snaps to the nearest iteration end
    assert on_grid(grid, np.array([1.96]), np.array([3.02]), np.array([2])) == pytest.approx([2.0, 3.0])


def test_iteration_ends_split_a_decode_span_evenly() -> None:
    class Result:
        steps = ((0.0, 1.0, "llm", "prefill", 2, 1), (1.0, 4.0, "llm", "decode", 2, 3))
        trace = (ExecutorTrace("e", "n", steps),)

    assert iteration_ends(Result()) == pytest.approx([1.0, 2.0, 3.0, 4.0])  # type: ignore[arg-type]


def test_a_simulated_stream_gets_one_token_per_iteration() -> None:
    model = load_model(DATA / "tiny-qwen2.yaml")
    cfg = EngineConfig("http://e", "tiny-qwen2", 128, 2048, 128, 1000, 4096)
    step = StepModel("llm", (0.010, 1e-4, 0.0, 0.0, 1e-3, 0.0), cfg.limits())
    reqs = [Request(i, 0.005 * i, "text", {"llm": {"prompt_tokens": 50.0, "output_tokens": 12.0}})
            for i in range(6)]
    first, finish, grid = _simulate(model, cfg, step, reqs, {})
    assert grid is not None and np.all(np.diff(grid) >= 0)
    assert np.all(np.isfinite(first)) and np.all(np.isfinite(finish))
    for f, e in zip(first, finish, strict=True):
        i0, i1 = np.abs(grid - f).argmin(), np.abs(grid - e).argmin()
        assert grid[i0] == pytest.approx(f, abs=1e-6)  # a first token lands on an iteration end
        assert grid[i1] == pytest.approx(e, rel=1e-3)  # the finish too (up to the span split)
        assert i1 - i0 == 11  # 12 tokens: the first, then one per iteration, none preempted here
