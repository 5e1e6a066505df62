"""The command-line reference (docs/reference/cli.md), generated from the typer app itself.

``python -m omniplane.cli.reference`` prints it; ``--write`` writes it to the docs (run from the
repository root). ``tests/cli/test_reference.py`` fails when the committed page differs from what
the app says, so a new or changed option cannot ship without its entry.

Every command is one section: its usage line, its help text and a table of its arguments and
options (names, what each accepts, its default, its help). The text comes from the same
``help=`` strings ``--help`` prints, unwrapped, so the page does not depend on the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

DOC = Path("docs/reference/cli.md")

# What an option accepts, named once here instead of in every row (the text --help prints).
LEGEND = {
    "a file to write (missing folders are created; an existing regular file is replaced, a link's "
    "target written)": "output file",
    "a folder to write into (created when missing)": "output folder",
    "an existing file": "existing file",
    "a catalog GPU name or alias, any case (omniplane gpus)": "GPU name",
    "a catalog model name (omniplane models) or a model spec file": "model",
    "a catalog workload name (src/omniplane/catalog/workloads) or a workload spec file": "workload",
    "0 <= N <= 9,223,372,036,854,775,807": "N >= 0",
}

HEADER = """# Command-line reference

Generated from the `omniplane` command itself by `python -m omniplane.cli.reference --write`
(a test fails when this page is out of date). The rules every command follows (exit status,
error messages, outputs, progress) are in [command-line.md](command-line.md). In the tables:

""" + "\n".join(f"- *{short}*: {full}" for full, short in LEGEND.items() if short != "N >= 0") + "\n"


def _walk(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, cmd
    if isinstance(cmd, TyperGroup):
        for name in sorted(cmd.commands):
            sub = cmd.commands[name]
            if not sub.hidden:
                yield from _walk(sub, [*path, name])


def _cell(text: str | None) -> str:
    """One table cell: one line, pipes escaped."""
    return " ".join((text or "").split()).replace("|", "\\|")


def _kind(param: Any) -> str:
    if getattr(param, "is_flag", False):
        return "flag"
    return f"`{param.metavar}`" if param.metavar else _cell(str(param.display_type()))


def _default(param: Any) -> str:
    if param.required:
        return "required"
    d = param.default
    if d is None or d == "" or callable(d) or (getattr(param, "is_flag", False) and d is False):
        return ""
    if d == sys.executable:  # machine-specific: say what it is, not where it is here
        return "the Python running omniplane"
    if isinstance(d, (list, tuple)):
        return ", ".join(f"`{x}`" for x in d) if d else ""
    return f"`{d}`"


def _names(param: Any) -> str:
    if param.param_type_name == "argument":
        return f"`{(param.metavar or param.name or '').upper()}`"
    names = list(param.opts)
    if param.secondary_opts:
        names += param.secondary_opts
    return ", ".join(f"`{n}`" for n in names)


def _section(path: list[str], cmd: Any) -> str:
    ctx = cmd.context_class(cmd, info_name=" ".join(path))
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    level = "#" * min(2 + len(path) - 1, 4)
    out = [f"{level} `{' '.join(path)}`", "", f"```\n{' '.join(path)} {usage}\n```", ""]
    doc = (cmd.help or "").split("\f")[0].strip()
    if doc:
        out += [doc, ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)
              and p.name not in {"help", "install_completion", "show_completion"}]
    if params:
        out += ["| option | accepts | default | help |", "|---|---|---|---|"]
        for p in params:
            help_text = getattr(p, "help", None) or ""
            for full, short in LEGEND.items():
                help_text = help_text.replace(f"[{full}]", f"[*{short}*]")
            out.append(f"| {_names(p)} | {_kind(p)} | {_cell(_default(p))} | {_cell(help_text)} |")
        out.append("")
    return "\n".join(out)


def render() -> str:
    """The whole page, from the app as it is now."""
    from omniplane.cli.app import app

    root = typer.main.get_command(app)
    parts = [HEADER]
    for path, cmd in _walk(root, ["omniplane"]):
        parts.append(_section(path, cmd))
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args == ["--write"]:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text, encoding="utf-8")
        print(f"wrote {DOC}", file=sys.stderr)
    elif not args:
        sys.stdout.write(text)
    else:
        print("usage: python -m omniplane.cli.reference [--write]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
