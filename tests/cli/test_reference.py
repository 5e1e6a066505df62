"""docs/reference/cli.md is what the typer app says: a changed option, a new command or a new help
text must come with the regenerated page (``python -m omniplane.cli.reference --write``)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from omniplane.cli.app import app
from omniplane.cli.reference import DOC, render

ROOT = Path(__file__).resolve().parents[2]


def _commands(cmd: object, path: str) -> list[str]:
    out = [path]
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        if not sub.hidden:
            out += _commands(sub, f"{path} {name}")
    return out


def test_the_committed_reference_is_current() -> None:
    committed = (ROOT / DOC).read_text(encoding="utf-8")
    assert committed == render(), (
        f"{DOC} is out of date: run `python -m omniplane.cli.reference --write` and commit it")


def test_every_command_and_option_has_an_entry() -> None:
    text = render()
    heads = re.findall(r"^#+ `([^`]+)`$", text, re.M)
    root = typer.main.get_command(app)
    assert heads == _commands(root, "omniplane")
    plan = text.split("### `omniplane plan`")[1].split("\n#")[0]
    for opt in ("--model", "--gpus", "--gpu", "--workload", "--out"):
        assert f"`{opt}`" in plan
