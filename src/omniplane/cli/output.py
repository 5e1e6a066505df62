"""Shared output helpers: JSON to stdout (always valid JSON), human text through rich, notices
and errors to stderr (``omniplane.cli.errors``)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, NoReturn

from rich.console import Console

from omniplane.cli.errors import fail as _fail

console = Console()
err_console = Console(stderr=True)


def jsonable(data: Any) -> Any:
    """``data`` with every non-finite float as ``null`` (JSON has no NaN or Infinity), numpy
    scalars and arrays as numbers and lists, paths and other objects as strings."""
    if isinstance(data, bool) or data is None or isinstance(data, str):
        return data
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, int):
        return data
    if isinstance(data, Mapping):
        return {str(k): jsonable(v) for k, v in data.items()}
    if isinstance(data, list | tuple | set | frozenset):
        return [jsonable(v) for v in data]
    if isinstance(data, PurePath):
        return str(data)
    item = getattr(data, "item", None)  # numpy scalar
    if callable(item) and getattr(data, "shape", None) == ():
        return jsonable(item())
    tolist = getattr(data, "tolist", None)  # numpy array
    if callable(tolist):
        return jsonable(tolist())
    return str(data)


def to_json_text(data: Any) -> str:
    return json.dumps(jsonable(data), indent=2, allow_nan=False) + "\n"


def print_json(data: Any) -> None:
    sys.stdout.write(to_json_text(data))
    sys.stdout.flush()


def notice(message: str) -> None:
    """A one-line notice on stderr (stdout stays one document under --json)."""
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()


def fail(message: str, code: int = 2) -> NoReturn:
    """Stop the command with a user error naming the option or file (exit 2)."""
    _fail(message)


def _min_width(table: Any) -> int:
    """The narrowest the table can be without splitting a word: each column as wide as its widest
    word (its whole text when ``no_wrap``), header included, plus padding and borders."""
    from rich.cells import cell_len
    from rich.text import Text

    total = 1
    for col in table.columns:
        widest = 1
        for cell in [col.header, *col.cells]:
            text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
            for line in text.splitlines() or [""]:
                parts = [line] if col.no_wrap else line.split()
                widest = max(widest, *(cell_len(p) for p in parts or [""]))
        total += widest + 2 * table.padding[1] + 1
    return int(total)


def print_table(table: Any, out: Console | None = None) -> None:
    """Print a rich table so that no word is cut: as a table when it fits the console's width
    without splitting a word or header, else as one line per row (``header: value; ...``)."""
    from rich.table import Table
    from rich.text import Text

    con = out or console
    assert isinstance(table, Table)
    for col in table.columns:
        if col.overflow == "ellipsis":
            col.overflow = "fold"
    if _min_width(table) <= con.width:
        con.print(table)
        return
    if table.title:
        con.print(str(table.title), highlight=False)

    def plain(cell: Any) -> str:
        text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
        return " ".join(text.split())

    cols = table.columns
    for row in zip(*(c.cells for c in cols), strict=True):
        parts = [f"{plain(c.header)}: {plain(v)}" for c, v in zip(cols, row, strict=True) if plain(v)]
        con.print("  " + "; ".join(parts), highlight=False)
