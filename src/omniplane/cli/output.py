"""Shared output helpers: JSON to stdout, human text through rich, errors to stderr."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
