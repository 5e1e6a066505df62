"""One error path for the whole CLI.

Every command runs inside :class:`OmniplaneGroup`, the root command's class, so every command
(also ones added later) gets the same rules without doing anything:

* a **user error** (a :class:`~omniplane.errors.UserError`: a bad spec, trace or name, an
  option value refused by :mod:`omniplane.cli.options`, a path that cannot be read or written,
  or a usage error of the command line) prints ``error: ...`` lines on stderr, each naming the
  option or file (and field) and what was expected, and exits with :data:`USER_ERROR` (2);
* **anything else** is a bug in omniplane: one line asking for a report, exit :data:`BUG` (70);
  ``--debug`` (or ``OMNIPLANE_DEBUG=1``) prints the traceback instead;
* SIGINT (Ctrl-C) exits 130 and SIGTERM 143, with one line naming the command that was
  stopped: both raise :class:`Interrupted` (a ``KeyboardInterrupt``) in the main thread, so
  every ``with`` block unwinds (staged outputs are discarded, worker pools terminated:
  :mod:`omniplane.parallel`); a second signal while that runs exits at once.

Messages are printed with control characters escaped (``\\x1b``), so a user's file can never
drive the terminal.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from typer._click import exceptions as cx  # typer >= 0.29 carries its own copy of click
from typer._click.core import Context
from typer.core import TyperCommand, TyperGroup

from omniplane.errors import UserError
from omniplane.inputs import forget_reads

USER_ERROR = 2
BUG = 70  # EX_SOFTWARE (sysexits.h)
INTERRUPTED = 130  # 128 + SIGINT
TERMINATED = 143  # 128 + SIGTERM
DEBUG_ENV = "OMNIPLANE_DEBUG"
# staged output path -> the user's path, filled by cli/files.py, so an OSError about a staging
# file names the path the user gave
STAGED_NAMES: dict[str, str] = {}
_running: list[str] = []  # the command path being run (for the interruption message)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: raised in the main thread by :func:`_on_signal`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def code(self) -> int:
        return 128 + self.signum


_caught: list[Interrupted] = []


def _on_signal(signum: int, frame: Any) -> None:
    if _caught:  # a second signal while the first one unwinds: stop now, staging removed
        import shutil

        for staged in list(STAGED_NAMES):
            shutil.rmtree(staged, ignore_errors=True)
        os._exit(128 + signum)
    exc = Interrupted(signum)
    _caught.append(exc)
    raise exc


def reclaim_signals() -> None:
    """SIGINT and SIGTERM raise :class:`Interrupted` again, after a library replaced the handlers
    (``ray.init`` installs its own SIGTERM handler, which ends the process at once and leaves its
    processes running). Main thread only."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, _on_signal)


@contextmanager
def signals_taken_back() -> Iterator[None]:
    """On leaving the block, however it ends, SIGINT and SIGTERM raise :class:`Interrupted` again
    (:func:`reclaim_signals`), whatever handlers the block installed."""
    try:
        yield
    finally:
        reclaim_signals()


class _Signals:
    """SIGINT and SIGTERM raise :class:`Interrupted` while the command runs (main thread only;
    a SIGINT ignored by the parent, as for a background job, stays ignored)."""

    def __enter__(self) -> _Signals:
        self.saved: dict[int, Any] = {}
        _caught.clear()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self.saved[sig] = signal.signal(sig, _on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def interrupted_message(exc: BaseException) -> tuple[str, int]:
    """The one line and exit status of an interruption."""
    if isinstance(exc, Interrupted):
        name, code = exc.args[0], exc.code
    elif _caught:
        name, code = _caught[0].args[0], _caught[0].code
    else:
        name, code = "SIGINT", INTERRUPTED
    what = f"'{_running[-1]}'" if _running else "the command"
    return f"interrupted by {name}: {what} stopped; no output file was written", code


class CliError(UserError):
    """A user error found by the CLI itself (an option that contradicts another, ...)."""


def fail(message: str) -> NoReturn:
    """Stop the command with a user error (exit 2); ``message`` names the option or file."""
    raise CliError(message)


def escape_controls(text: str) -> str:
    """``text`` with every control character (ESC, BEL, CR, DEL, C1, ...) but newline written as
    its escape (``\\x1b``), as ``repr`` would, so printing it cannot drive a terminal."""
    out = []
    for ch in text:
        o = ord(ch)
        if ch != "\n" and (o < 32 or 127 <= o < 160 or ch in "\u2028\u2029"):
            out.append(repr(ch)[1:-1] if ch != "\t" else " ")
        else:
            out.append(ch)
    return "".join(out)


def _lines(message: str) -> list[str]:
    """A message as ``error:`` lines: one per line of the message, whitespace collapsed, control
    characters escaped."""
    lines = [" ".join(escape_controls(line).split()) for line in message.split("\n")]
    return [line for line in lines if line] or ["(no message)"]


def print_error(message: str) -> None:
    red = sys.stderr.isatty() and "NO_COLOR" not in os.environ
    tag = "\x1b[1;31merror:\x1b[0m" if red else "error:"
    for line in _lines(message):
        sys.stderr.write(f"{tag} {line}\n")
    sys.stderr.flush()


def describe_os_error(exc: OSError) -> str:
    """``PATH: No such file or directory`` (the path first, as every other error names its file)."""
    if exc.filename is not None and exc.strerror:
        name = str(exc.filename)
        for staged, final in STAGED_NAMES.items():
            if name.startswith(staged):
                name = final
                break
        return f"{name}: {exc.strerror.lower()}"
    text = str(exc)
    for staged, final in STAGED_NAMES.items():
        text = text.replace(staged, final)
    return text


def _debug(ctx: Context | None) -> bool:
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        return True
    return bool(ctx is not None and ctx.find_root().params.get("debug"))


def _parser(param: Any) -> Any:
    info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
    return getattr(info, "parser", None)


def _label(param: Any, value: object) -> str:
    name = param.opts[0] if getattr(param, "param_type_name", "") == "option" else param.human_readable_name
    return f"{name} {value}"


def _same(a: object, b: object) -> bool:
    try:
        return os.path.samefile(str(a), str(b))
    except (OSError, ValueError):
        return False


def check_paths(ctx: Context) -> None:
    """Before a command runs: no output path (a parameter whose parser ``writes``) names one of
    its input files or another output, through any link (``os.path.samefile``)."""
    outs: list[tuple[Any, object]] = []
    ins: list[tuple[Any, object]] = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if isinstance(v, str | os.PathLike):
                (outs if getattr(_parser(param), "writes", False) else ins).append((param, v))
    for k, (oparam, out) in enumerate(outs):
        for iparam, other in [*ins, *outs[:k]]:
            both_out = (iparam, other) in outs
            if _same(out, other) or (both_out and os.path.realpath(str(out)) == os.path.realpath(str(other))):
                role = "an output" if both_out else "an input"
                raise CliError(f"{_label(oparam, out)}: is the same file as {_label(iparam, other)}, "
                               f"{role} of this command; write the output elsewhere")


class _Checked:
    """What every command does before its own code runs: forget the files read by an earlier
    command in this process, remember its name (for the interruption message), check its
    paths (:func:`check_paths`)."""

    def invoke(self, ctx: Context) -> Any:
        forget_reads()
        root = ctx.find_root().info_name or ""
        _running.append("omniplane" + ctx.command_path[len(root):])
        check_paths(ctx)
        return super().invoke(ctx)  # type: ignore[misc]


class OmniplaneCommand(_Checked, TyperCommand):
    """Every leaf command's class (:func:`new_app`)."""


class OmniplaneSubGroup(_Checked, TyperGroup):
    """Every command group's class but the root's (a group may take options: ``plan``)."""


class _Typer(typer.Typer):
    def command(self, *args: Any, **kw: Any) -> Any:
        kw["cls"] = kw.get("cls") or OmniplaneCommand
        return super().command(*args, **kw)


class OmniplaneGroup(TyperGroup):
    """The root command: parses and runs a subcommand and turns what goes wrong into the rules
    of this module's docstring."""

    def invoke(self, ctx: Context) -> Any:
        _running.clear()
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
        except KeyboardInterrupt as exc:
            message, code = interrupted_message(exc)
            print_error(message)
            raise typer.Exit(code) from None
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
            with _Signals():
                rv = super().main(args, prog_name, complete_var, standalone_mode=False,
                                  windows_expand_args=windows_expand_args, **extra)
        except KeyboardInterrupt as exc:  # outside a command (while parsing)
            message, code = interrupted_message(exc)
            print_error(message)
            return _exit(code, standalone_mode)
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
            if _caught:
                message, code = interrupted_message(_caught[0])
                print_error(message)
                return _exit(code, standalone_mode)
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
    tracebacks; the root app runs every command under :class:`OmniplaneGroup`, and every
    command and group checks its paths first (:class:`OmniplaneCommand`)."""
    kw.setdefault("no_args_is_help", True)
    kw["cls"] = OmniplaneGroup if root else OmniplaneSubGroup
    return _Typer(help=help, rich_markup_mode=None, add_completion=False,
                       pretty_exceptions_enable=False, **kw)


def about(path: object, exc: BaseException) -> str:
    """``exc``'s message led by ``path`` (unless the message already names it)."""
    message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return message if str(path) in message else f"{path}: {message}"
