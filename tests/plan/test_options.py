"""Planner options are validated with messages that name the option."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.plan.options import PlannerOptions


@pytest.mark.parametrize(("kwargs", "text"), [
    ({"k_c": 0}, "k_c"),
    ({"routing_step": 0.3}, "routing_step"),
    ({"alpha": 1.5}, "alpha"),
    ({"max_simulated": 0}, "max_simulated"),
    ({"routing": "lp"}, "not implemented"),
    ({"routing": "random"}, "routing must be 'grid'"),
])
def test_bad_options_are_refused_by_name(kwargs: dict[str, object], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        PlannerOptions(**kwargs)  # type: ignore[arg-type]


def test_the_cli_refuses_lp_routing_with_the_reason() -> None:
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-vl", "--gpus", "2", "--routing", "lp"])
    assert result.exit_code == 2
    assert "not implemented" in result.output
