"""Every option of every command (also ones added later) follows the CLI's rules: numbers and
paths are checked by a validated type before the command runs, defaults lie in the range the
help states, help has no stray type markers, and the parsers refuse generic bad values."""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.main import get_command

from omniplane.cli import options as opt
from omniplane.cli.app import app

ROOT = get_command(app)


def walk(cmd: Any = ROOT, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from walk(sub, (*path, name))


# every command that takes parameters (`plan` is a group with options of its own)
COMMANDS = [(p, c) for p, c in walk() if p and (not getattr(c, "commands", None) or len(c.params) > 1)]
FREE = {("validate", "files")}  # validate reports missing and unreadable files itself, as results
PARAMS = [(p, c, prm) for p, c in COMMANDS for prm in c.params]


def base(annotation: Any) -> Any:
    """``int | None`` -> int, ``list[Path] | None`` -> Path."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return base(args[0]) if len(args) == 1 else annotation
    if origin is list:
        return base(typing.get_args(annotation)[0])
    return annotation


def parser_of(param: Any) -> Any:
    return param.type_descriptor.parameter_info.parser


def ident(item: tuple[tuple[str, ...], Any, Any]) -> str:
    return f"{' '.join(item[0])} {item[2].name}"


def test_the_tree_has_the_commands() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"plan", "plan show", "sim run", "perf solo", "workload sample", "deploy", "gpus",
            "experiment horizon", "validate"} <= names


@pytest.mark.parametrize("item", PARAMS, ids=[ident(i) for i in PARAMS])
def test_numbers_and_paths_are_validated(item: tuple[tuple[str, ...], Any, Any]) -> None:
    path, _, param = item
    kind = base(param.type_descriptor.annotation)
    if (*path, param.name) in FREE:
        return
    if kind in (int, float, Path) and not getattr(param, "is_flag", False) and param.name != "version":
        assert parser_of(param) is not None, f"{param.name}: a {kind.__name__} option without a " \
                                             "validated type (omniplane.cli.options)"


@pytest.mark.parametrize("item", PARAMS, ids=[ident(i) for i in PARAMS])
def test_defaults_pass_their_own_check_and_help_states_the_range(item: tuple[tuple[str, ...], Any, Any]
                                                                  ) -> None:
    _, _, param = item
    parse = parser_of(param)
    if parse is None:
        return
    if param.default is not None and not callable(param.default):
        parse(param.default)  # raises when the default is outside the stated range
    text = getattr(parse, "text", "")
    if text and isinstance(parse, opt.Integer | opt.Number):
        assert text in (param.help or ""), f"{param.name}: the help does not state {text!r}"


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_has_no_type_markers_and_marks_required(path: tuple[str, ...]) -> None:
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output
    options = [x for x in res.output.splitlines() if x.lstrip().startswith("--")]
    assert options and not [x for x in options if re.match(r"^\s+--\S+( / --\S+)?\s+<", x)], res.output
    cmd = dict(COMMANDS)[path]
    for param in cmd.params:
        if param.required and param.param_type_name == "option":
            assert "[required]" in res.output, f"{param.name} is required but not marked"
    assert max(len(x) for x in res.output.splitlines()) <= 80, res.output


BAD = ["", "abc", "nan", "inf", "-inf", "1e400", "1e300", "-1e300", "True"]


@pytest.mark.parametrize("parse", [opt.Integer(1, 256), opt.Number(0, 1, lo_open=True),
                                   opt.Number(0, 1e6, lo_open=True), opt.Integer(0, 2**63 - 1)],
                         ids=["int", "fraction", "rate", "seed"])
def test_numeric_types_refuse_generic_bad_values(parse: Any) -> None:
    for value in BAD:
        with pytest.raises(typer.BadParameter):
            parse(value)


def test_number_bounds_open_and_closed() -> None:
    rate = opt.Number(0, 10, lo_open=True)
    assert rate("10") == 10 and rate("1e-9") == 1e-9
    for bad in ("0", "10.0001", "-0"):
        with pytest.raises(typer.BadParameter, match="0 < x <= 10"):
            rate(bad)
    assert opt.Integer(1, 4)("3") == 3
    with pytest.raises(typer.BadParameter, match="whole number"):
        opt.Integer(1, 4)("2.5")


def test_names_any_case_canonical_out() -> None:
    assert opt.GpuKind()("a100") == "A100-80GB"
    assert opt.GpuKind()("rtx6000ada") == "RTX6000Ada"
    assert opt.GpuKind()("RTX-6000-ADA") == "RTX6000Ada"
    assert opt.Choice(["total", "balanced"])("Balanced") == "balanced"
    with pytest.raises(typer.BadParameter, match="did you mean RTX6000Ada"):
        opt.GpuKind()("rtx6000adaa")
    with pytest.raises(typer.BadParameter, match="not one of the GPU kinds this command supports"):
        opt.GpuKind(["RTX6000Ada"])("h100")


def test_paths(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert opt.OutputFile()(tmp_path / "new" / "deeper" / "out.yaml")  # folders created later
    assert opt.OutputDir()(tmp_path / "new-folder")
    for parse, value in ((opt.OutputFile(), tmp_path / "f" / "x.yaml"), (opt.OutputFile(), tmp_path),
                         (opt.OutputDir(), tmp_path / "f"), (opt.InputPath(), tmp_path / "missing"),
                         (opt.InputPath(), tmp_path), (opt.InputPath("folder"), tmp_path / "f")):
        with pytest.raises(typer.BadParameter):
            parse(value)


def test_tp_url_host() -> None:
    assert [opt.tp_degree(v) for v in ("1", "2", "8")] == [1, 2, 8]
    for bad in ("3", "0", "6", "2048"):
        with pytest.raises(typer.BadParameter):
            opt.tp_degree(bad)
    assert opt.url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    for bad in ("127.0.0.1:8000", "ftp://x", "http://", "http://a b"):
        with pytest.raises(typer.BadParameter):
            opt.url(bad)
    assert opt.host("::1") == "::1" and opt.host("node-1.example") == "node-1.example"
    for bad in ("", "a b", "x/y", "-x"):
        with pytest.raises(typer.BadParameter):
            opt.host(bad)
    assert math.isfinite(opt.Number()("1e308"))
