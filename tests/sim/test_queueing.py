"""The simulator against closed-form queueing results, through the ordinary executor path."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.sim.queueing import check_queue, closed_form_wait


def test_closed_forms_match_textbook_values() -> None:
    assert closed_form_wait("mm1", 0.8) == pytest.approx(4.0)
    assert closed_form_wait("md1", 0.8) == pytest.approx(2.0)  # half of M/M/1 (P-K)
    # M/M/4 at rho 0.8: Erlang C = 0.5964, Wq = C / (c mu - lambda) = 0.5964 / 0.8
    assert closed_form_wait("mmc", 0.8, servers=4) == pytest.approx(0.74554, rel=1e-4)
    assert closed_form_wait("mmc", 0.5, servers=1) == pytest.approx(closed_form_wait("mm1", 0.5))


@pytest.mark.parametrize(("kind", "servers"), [("mm1", 1), ("md1", 1), ("mmc", 4)])
def test_simulated_wait_agrees_with_theory(kind: str, servers: int) -> None:
    res = check_queue(kind, 0.8, servers=servers, customers=12_000, replications=6,  # type: ignore[arg-type]
                      seed=11)
    # the tolerance comes from the replications themselves: 2.5 half-widths of the 95% interval
    assert abs(res.simulated_wait - res.closed_form_wait) <= 2.5 * res.half_width
    assert res.relative_half_width < 0.35  # the runs are long enough to say something


def test_low_load_is_tight() -> None:
    res = check_queue("mm1", 0.5, customers=20_000, replications=5, seed=3)
    assert res.contains_closed_form or abs(res.simulated_wait - 1.0) <= 2 * res.half_width
    assert res.relative_half_width < 0.1


def test_cli_reports_both_numbers() -> None:
    out = CliRunner().invoke(app, ["sim", "queue", "--kind", "md1", "--rho", "0.6", "--customers",
                                   "3000", "--replications", "3", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["closed_form_mean_wait"] == pytest.approx(0.6 / (2 * 0.4))
    assert data["customers"] == 9000 and data["events_per_s"] > 0
    bad = CliRunner().invoke(app, ["sim", "queue", "--rho", "1.2"])
    assert bad.exit_code == 2 and "rho" in bad.output
