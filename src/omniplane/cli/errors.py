"""One error path for the whole CLI.

Every command runs inside :class:`OmniplaneGroup`, the root command's class, so every command
(also ones added later) gets the same rules without doing anything:

* a **user error** (a :class:`~omniplane.errors.UserError`: a bad spec, trace or name, an
  option value refused by :mod:`omniplane.cli.options`, a path that cannot be read or written,
  or a usage error of the command line) prints ``error: ...`` lines on stderr, each naming the
  option or file (and field) and what was expected, and exits with :data:`USER_ERROR` (2);
* **anything else** is a bug in omniplane: one line asking for a report, exit :data:`BUG` (70);
  ``--debug`` (or ``OMNIPLANE_DEBUG=1``) prints the traceback instead;
* Ctrl-C exits 130 (outputs are written atomically at the end, so none is left half-written).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import typer
from typer._click import exceptions as cx  # typer >= 0.29 carries its own copy of click
from typer._click.core import Context
from typer.core import TyperGroup

from omniplane.errors import UserError

USER_ERROR = 2
BUG = 70  # EX_SOFTWARE (sysexits.h)
INTERRUPTED = 130
DEBUG_ENV = "OMNIPLANE_DEBUG"


class CliError(UserError):
    """A user error found by the CLI itself (an option that contradicts another, ...)."""


def fail(message: str) -> NoReturn:
    """Stop the command with a user error (exit 2); ``message`` names the option or file."""
    raise CliError(message)


def _lines(message: str) -> list[str]:
    """A message as ``error:`` lines: one per line of the message, whitespace collapsed."""
    return [" ".join(line.split()) for line in message.splitlines() if line.strip()] or ["(no message)"]


def print_error(message: str) -> None:
    red = sys.stderr.isatty() and "NO_COLOR" not in os.environ
    tag = "\x1b[1;31merror:\x1b[0m" if red else "error:"
    for line in _lines(message):
        sys.stderr.write(f"{tag} {line}\n")
    sys.stderr.flush()


def describe_os_error(exc: OSError) -> str:
    """``PATH: No such file or directory`` (the path first, as every other error names its file)."""
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror.lower()}"
    return str(exc)


def _debug(ctx: Context | None) -> bool:
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        return True
    return bool(ctx is not None and ctx.find_root().params.get("debug"))


class OmniplaneGroup(TyperGroup):
    """The root command: parses and runs a subcommand and turns what goes wrong into the rules
    of this module's docstring."""

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, cx.ClickException):
            raise
        except UserError as exc:
            print_error(str(exc))
            raise typer.Exit(USER_ERROR) from None
        except BrokenPipeError:  # stdout closed early (`omniplane models --json | head`): not an error
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the interpreter's final flush is quiet
            raise typer.Exit(1) from None
        except OSError as exc:  # a path the checks could not foresee (removed meanwhile, full disk)
            print_error(describe_os_error(exc))
            raise typer.Exit(USER_ERROR) from None
        except MemoryError:
            print_error("out of memory: the inputs and options ask for more memory than this "
                        "machine has; ask for fewer requests, a shorter duration or a smaller budget")
            raise typer.Exit(USER_ERROR) from None
        except KeyboardInterrupt:
            print_error("interrupted")
            raise typer.Exit(INTERRUPTED) from None
        except Exception as exc:
            if _debug(ctx):
                traceback.print_exc()
            else:
                print_error(f"internal error: {type(exc).__name__}: {exc}")
                print_error("this is a bug in omniplane: please report it with the command line and "
                            "this message; rerun with --debug for the traceback")
            raise typer.Exit(BUG) from None

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False,
                              windows_expand_args=windows_expand_args, **extra)
        except cx.NoArgsIsHelpError as exc:  # the command alone: its help, as a usage slip
            sys.stderr.write(exc.format_message().rstrip("\n") + "\n")
            return _exit(USER_ERROR, standalone_mode)
        except cx.ClickException as exc:
            hint = ""
            uctx = getattr(exc, "ctx", None)
            if isinstance(exc, cx.UsageError) and uctx is not None:
                hint = f" (see '{uctx.command_path} --help')"
            print_error(exc.format_message() + hint)
            return _exit(exc.exit_code if exc.exit_code != 1 else USER_ERROR, standalone_mode)
        except typer.Abort:
            print_error("aborted")
            return _exit(INTERRUPTED, standalone_mode)
        code = rv if isinstance(rv, int) else 0
        return _exit(code, standalone_mode) if standalone_mode else rv


def _exit(code: int, standalone_mode: bool) -> Any:
    if standalone_mode:
        sys.exit(code)
    return code


def new_app(help: str, *, root: bool = False, **kw: Any) -> typer.Typer:
    """A typer app with the CLI's conventions: plain help text (flags without a type, required
    options marked ``[required]``, wrapped to the terminal), no completion installer, no rich
    tracebacks; the root app runs every command under :class:`OmniplaneGroup`."""
    kw.setdefault("no_args_is_help", True)
    if root:
        kw["cls"] = OmniplaneGroup
    return typer.Typer(help=help, rich_markup_mode=None, add_completion=False,
                       pretty_exceptions_enable=False, **kw)


def about(path: object, exc: BaseException) -> str:
    """``exc``'s message led by ``path`` (unless the message already names it)."""
    message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return message if str(path) in message else f"{path}: {message}"
