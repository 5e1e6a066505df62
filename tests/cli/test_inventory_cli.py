"""``omniplane plan --inventory``: bad input is refused before any planning, naming what was expected."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize(("args", "says"), [
    (["--inventory", "H100:7"], "not whole hosts of --host-gpus 8"),
    (["--inventory", "H100:8", "--host-gpus", "3"], "not whole hosts of --host-gpus 3"),
    (["--inventory", "B300:8"], "unknown GPU kind 'B300'"),
    (["--inventory", "H100"], "expected KIND:COUNT"),
    (["--inventory", "H100:8", "--gpus", "8"], "leave --gpus"),
    (["--inventory", "H100:8", "--runtime", "ideal"], "vLLM-Omni's space"),
])
def test_a_bad_inventory_is_refused_with_what_was_expected(args: list[str], says: str) -> None:
    res = runner.invoke(app, ["plan", "--model", "qwen3-omni", *args])
    assert res.exit_code != 0
    assert says in " ".join(res.output.split())
