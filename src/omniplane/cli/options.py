"""Validated option and argument types: what every command accepts, checked before it starts.

Each factory returns a ``typer.Option`` (or ``typer.Argument``) whose parser refuses a bad value
at parse time (exit 2 naming the option and what was expected, before any work) and whose help
states the range that parser enforces, from the same numbers. Names (GPU kinds, models,
workloads, choices) are accepted in any case and returned in their canonical spelling; paths
are checked for what the command will do with them (read a file, write a file, fill a folder).

Commands use these instead of bare ``typer.Option`` so that a new command gets the same rules.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import typer

from omniplane.errors import unknown_name
from omniplane.spec.base import MAX_RATE, MAX_REQUESTS, MAX_SECONDS
from omniplane.spec.executor import MAX_TP

MAX_GPUS = 64  # the planner's budget limit: measured (docs/results/plan.md, "GPU budget")
GPUS_WHY = ("the planner's limit: its Monte Carlo candidates grow with the square of the budget, "
            "134k for Qwen3-Omni at 16 GPUs, 2.1M at 64; docs/results/plan.md, 'GPU budget'")
MAX_MIX_WEIGHT = 1e9  # --mix weights before --normalize


def _bad(message: str) -> typer.BadParameter:
    return typer.BadParameter(message)


def _range(lo: float | None, hi: float | None, lo_open: bool = False, hi_open: bool = False,
           var: str = "x") -> str:
    def g(x: float) -> str:
        return f"{x:,}" if isinstance(x, int) else f"{x:g}"

    if lo is not None and hi is not None:
        return f"{g(lo)} {'<' if lo_open else '<='} {var} {'<' if hi_open else '<='} {g(hi)}"
    if lo is not None:
        return f"{var} {'>' if lo_open else '>='} {g(lo)}"
    if hi is not None:
        return f"{var} {'<' if hi_open else '<='} {g(hi)}"
    return "any number"


_WHOLE = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: int() would take '٣' or '１'
_REAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(nan|inf|infinity)",
                   re.IGNORECASE)
MAX_DIGITS = 30  # longer numbers are refused before conversion (far beyond every range here)


def _shown(value: Any) -> str:
    text = repr(str(value))
    return text if len(text) <= 40 else f"{text[:40]}... ({len(str(value)):,} characters)"


class Integer:
    """A whole number in ``[lo, hi]``, written in ASCII digits."""

    def __init__(self, lo: int | None = None, hi: int | None = None, why: str = "") -> None:
        self.lo, self.hi, self.why = lo, hi, why
        self.text = _range(lo, hi, var="N")

    def __call__(self, value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            text = str(value).strip()
            if not _WHOLE.fullmatch(text) or len(text) > MAX_DIGITS:
                raise _bad(f"expected a whole number in ASCII digits ({self.text}), got {_shown(value)}")
            n = int(text)
        if (self.lo is not None and n < self.lo) or (self.hi is not None and n > self.hi):
            why = f" ({self.why})" if self.why and self.hi is not None and n > self.hi else ""
            raise _bad(f"expected a whole number with {self.text}, got {n}{why}")
        return n


class Number:
    """A finite real number in a range (bounds open or closed)."""

    def __init__(self, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
                 hi_open: bool = False) -> None:
        self.lo, self.hi, self.lo_open, self.hi_open = lo, hi, lo_open, hi_open
        self.text = _range(lo, hi, lo_open, hi_open)

    def __call__(self, value: Any) -> float:
        if isinstance(value, str) and (not _REAL.fullmatch(value.strip()) or len(value) > 2 * MAX_DIGITS):
            raise _bad(f"expected a number in ASCII digits ({self.text}), got {_shown(value)}")
        try:
            x = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError, OverflowError):
            raise _bad(f"expected a number ({self.text}), got {_shown(value)}") from None
        if not math.isfinite(x):
            raise _bad(f"expected a finite number ({self.text}), got {value!r}")
        lo, hi = self.lo, self.hi
        if lo is not None and (x < lo or (self.lo_open and x == lo)):
            raise _bad(f"expected a number with {self.text}, got {value!r}")
        if hi is not None and (x > hi or (self.hi_open and x == hi)):
            raise _bad(f"expected a number with {self.text}, got {value!r}")
        return x


class Choice:
    """One of ``names`` (any case); returns the canonical spelling."""

    def __init__(self, names: Iterable[str], what: str = "value") -> None:
        self.names = tuple(names)
        self.what = what
        self.text = " | ".join(self.names)

    def __call__(self, value: Any) -> str:
        text = str(value).strip()
        for n in self.names:
            if n.lower() == text.lower():
                return n
        raise _bad(str(unknown_name(self.what, text, self.names)))


class GpuKind:
    """A GPU kind of the catalog by name or alias, any case; returns the catalog's name."""

    text = "a catalog GPU name or alias, any case (omniplane gpus)"

    def __init__(self, allowed: Iterable[str] | None = None) -> None:
        self.allowed = tuple(allowed) if allowed is not None else None

    def __call__(self, value: Any) -> str:
        from omniplane.spec import load_gpus

        catalog = load_gpus()
        try:
            name = catalog.get(str(value).strip()).name
        except KeyError:
            raise _bad(str(unknown_name("GPU kind", str(value), catalog.names(),
                                        "; aliases: omniplane gpus"))) from None
        if self.allowed is not None and name not in self.allowed:
            raise _bad(f"{name} is not one of the GPU kinds this command supports: "
                       f"{', '.join(self.allowed)}")
        return name


class CatalogRef:
    """A catalog name (any case) or a spec file that exists; returned as given (a str)."""

    def __init__(self, what: str, find: Callable[[str], Path | None], listing: Callable[[], list[Path]],
                 command: str) -> None:
        self.what, self.find, self.listing, self.command = what, find, listing, command
        self.text = f"a catalog {what} name ({command}) or a {what} spec file"

    def __call__(self, value: Any) -> str:
        text = str(value).strip()
        if self.find(text) is not None:
            return text
        path = Path(text)
        if path.is_file():
            return text
        if path.is_dir():
            raise _bad(f"{text} is a folder; expected a {self.what} spec file or catalog name")
        if path.exists():  # a FIFO, socket or device: never read (it may block or never end)
            raise _bad(f"{text} is {_special(path.stat().st_mode)}; expected a {self.what} spec file "
                       "(a regular file) or catalog name")
        if path.suffix in (".yaml", ".yml", ".json") or "/" in text:
            raise _bad(f"no such file: {text}")
        names = [p.stem for p in self.listing()]
        raise _bad(f"{unknown_name(self.what, text, names)} (or give a spec file; {self.command})")


def model_ref() -> CatalogRef:
    from omniplane.spec import catalog_model_paths, find_catalog_model

    return CatalogRef("model", find_catalog_model, catalog_model_paths, "omniplane models")


def workload_ref() -> CatalogRef:
    from omniplane.spec import catalog_workload_paths, find_catalog_workload

    return CatalogRef("workload", find_catalog_workload, catalog_workload_paths,
                      "src/omniplane/catalog/workloads")


class InputPath:
    """A file (or folder) that exists and can be read."""

    def __init__(self, kind: str = "file") -> None:
        self.kind = kind  # "file", "folder" or "path" (either)
        self.text = f"an existing {kind}"

    def __call__(self, value: Any) -> Path:
        path = Path(str(value))
        if not path.exists():
            raise _bad(f"no such {self.kind}: {path}")
        if self.kind == "file" and path.is_dir():
            raise _bad(f"{path} is a folder; expected a file")
        if self.kind == "file" and not path.is_file():  # never read: it may block or never end
            raise _bad(f"{path} is {_special(path.stat().st_mode)}; expected a regular file")
        if self.kind == "folder" and not path.is_dir():
            raise _bad(f"{path} is a file; expected a folder")
        if not os.access(path, os.R_OK):
            raise _bad(f"{path} is not readable")
        return path


def _writable_ancestor(path: Path) -> None:
    """The nearest existing folder above ``path`` must be a writable folder (missing folders
    between it and ``path`` are created when the command writes)."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise _bad(f"cannot create {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _bad(f"cannot write {path}: the folder {parent} is not writable")


def _special(mode: int) -> str | None:
    """What a non-regular file is (``None`` for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a socket" if stat.S_ISSOCK(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


class OutputFile:
    """A file the command will write: a new or regular file (never a device, FIFO, socket or
    folder; a symbolic link is written through to its target), in a folder it can create or
    write; with ``suffixes``, named for what the command writes (``.png``: a PNG is not written
    as x.jpg). A trailing slash names a folder, so it is refused."""

    writes = True  # cli/errors.check_paths: never the same file as an input

    def __init__(self, suffixes: Iterable[str] = ()) -> None:
        self.suffixes = tuple(suffixes)
        named = f" named {' or '.join(self.suffixes)}" if self.suffixes else ""
        self.text = (f"a file to write{named} (missing folders are created; an existing regular file "
                     "is replaced, a link's target written)")

    def __call__(self, value: Any) -> Path:
        text = str(value)
        path = Path(text)
        if text.strip() in ("", "."):
            raise _bad("expected a file name")
        if text.endswith(("/", os.sep)):
            raise _bad(f"{text}: names a folder (it ends in '/'); expected a file name")
        if self.suffixes and path.suffix.lower() not in self.suffixes:
            raise _bad(f"{path}: expected a file name ending in {' or '.join(self.suffixes)} (what this "
                       "command writes)")
        real = Path(os.path.realpath(path)) if path.is_symlink() else path
        try:
            kind = _special(os.stat(real).st_mode)
        except FileNotFoundError:
            kind = None
        except OSError as exc:
            raise _bad(f"{path}: cannot check it ({exc.strerror})") from None
        if kind == "a folder":
            raise _bad(f"{path} is a folder; expected a file name")
        if kind is not None:
            raise _bad(f"{path} is {kind}; an output is written only to a new or regular file "
                       "(omniplane never replaces a device, FIFO or socket)")
        if real.exists() and not os.access(real, os.W_OK):
            raise _bad(f"{path} exists and is not writable")
        _writable_ancestor(real)
        return path


class OutputDir:
    """A folder the command will write files into (created when missing)."""

    text = "a folder to write into (created when missing)"
    writes = True

    def __call__(self, value: Any) -> Path:
        path = Path(str(value))
        if path.exists() and not path.is_dir():
            raise _bad(f"{path} is a file; expected a folder")
        if path.is_dir():
            if not os.access(path, os.W_OK | os.X_OK):
                raise _bad(f"the folder {path} is not writable")
            return path
        _writable_ancestor(path)
        return path


def tp_degree(value: Any) -> int:
    """A tensor-parallel degree: a power of two from 1 to MAX_TP."""
    n = Integer(1, MAX_TP)(value)
    if n & (n - 1):
        raise _bad(f"expected a power of two (1, 2, 4, 8, ...) up to {MAX_TP}, got {n}")
    return n


def url(value: Any) -> str:
    """An http(s) base URL (a trailing slash dropped)."""
    text = str(value).strip().rstrip("/")
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("http", "https") or not rest or any(c.isspace() for c in rest):
        raise _bad(f"expected an http(s) URL such as http://127.0.0.1:8000, got {value!r}")
    return text


_HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")


def host(value: Any) -> str:
    """A host name or an IP address (IPv6 with or without brackets)."""
    text = str(value).strip()
    try:
        ipaddress.ip_address(text.strip("[]"))
        return text
    except ValueError:
        pass
    if not _HOSTNAME.match(text):
        raise _bad(f"expected a host name or IP address such as 127.0.0.1, got {value!r}")
    return text


def check_port_free(host: str, port: int, option: str = "--port") -> None:
    """A user error naming ``option`` when ``host:port`` cannot be bound here (in use by another
    server, or a privileged port); checked before a server (Ray Serve) starts."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), port))
        except OSError as exc:
            why = ("already in use (another server is listening there)" if exc.errno == errno.EADDRINUSE
                   else exc.strerror or str(exc))
            raise _bad(f"{option} {port}: cannot listen on {host}:{port}: {why}; choose another "
                       f"{option}") from None


# ---- option factories ------------------------------------------------------------------------
def _help(help: str, parser: Any) -> str:
    text = getattr(parser, "text", "")
    return f"{help} [{text}]" if text else help


def option(*names: str, help: str, parser: Callable[[Any], Any], metavar: str, **kw: Any) -> Any:
    """An option whose value ``parser`` checks; its help ends with the parser's range."""
    return typer.Option(*names, parser=parser, metavar=metavar, help=_help(help, parser), **kw)


def argument(help: str, parser: Callable[[Any], Any], metavar: str, **kw: Any) -> Any:
    return typer.Argument(parser=parser, metavar=metavar, help=_help(help, parser), **kw)


def int_opt(*names: str, help: str, lo: int | None = 0, hi: int | None = None, why: str = "",
            **kw: Any) -> Any:
    return option(*names, help=help, parser=Integer(lo, hi, why), metavar="N", **kw)


def float_opt(*names: str, help: str, lo: float | None = None, hi: float | None = None,
              lo_open: bool = False, hi_open: bool = False, metavar: str = "X", **kw: Any) -> Any:
    return option(*names, help=help, parser=Number(lo, hi, lo_open=lo_open, hi_open=hi_open),
                  metavar=metavar, **kw)


def choice_opt(*names: str, help: str, choices: Iterable[str], what: str = "value", **kw: Any) -> Any:
    parser = Choice(choices, what)
    return typer.Option(*names, parser=parser, metavar="NAME", help=f"{help} [{parser.text}]", **kw)


def gpu_opt(*names: str, help: str = "GPU kind", allowed: Iterable[str] | None = None,
            **kw: Any) -> Any:
    parser = GpuKind(allowed)
    text = f"one of {', '.join(parser.allowed)}, any spelling" if parser.allowed else parser.text
    return typer.Option(*names, parser=parser, metavar="GPU", help=f"{help} [{text}]", **kw)


def file_opt(*names: str, help: str, kind: str = "file", **kw: Any) -> Any:
    return option(*names, help=help, parser=InputPath(kind), metavar="PATH", **kw)


def out_opt(*names: str, help: str, suffixes: Iterable[str] = (), **kw: Any) -> Any:
    return option(*names, help=help, parser=OutputFile(suffixes), metavar="FILE", **kw)


def out_dir_opt(*names: str, help: str, **kw: Any) -> Any:
    return option(*names, help=help, parser=OutputDir(), metavar="DIR", **kw)


def tp_opt(help: str, **kw: Any) -> Any:
    return option("--tp", help=f"{help} (a power of two)", parser=tp_degree, metavar="N", **kw)


def url_opt(*names: str, help: str, **kw: Any) -> Any:
    return option(*names, help=help, parser=url, metavar="URL", **kw)


def host_opt(*names: str, help: str, **kw: Any) -> Any:
    return option(*names, help=help, parser=host, metavar="HOST", **kw)


def json_opt(help: str = "Print one JSON document on stdout (progress and notices go to stderr).") -> Any:
    return typer.Option("--json", help=help)


def n_opt(help: str = "Number of requests.") -> Any:
    return int_opt("--n", help=help, lo=1, hi=MAX_REQUESTS)


def duration_opt(*names: str, help: str = "Seconds of arrivals.") -> Any:
    return float_opt(*(names or ("--duration",)), help=help, lo=0, hi=MAX_SECONDS, lo_open=True,
                     metavar="SECONDS")


def rate_opt(*names: str, help: str = "Mean arrival rate, requests per second.") -> Any:
    return float_opt(*(names or ("--rate",)), help=help, lo=0, hi=MAX_RATE, lo_open=True,
                     metavar="REQ/S")


def seed_opt(help: str = "Random seed.") -> Any:
    return int_opt("--seed", help=help, lo=0, hi=2**63 - 1)


def percentile_opt(*names: str, help: str, **kw: Any) -> Any:
    return float_opt(*names, help=help, lo=0, hi=100, lo_open=True, hi_open=True, metavar="P", **kw)


def multiplier_opt(*names: str, help: str, **kw: Any) -> Any:
    return float_opt(*names, help=help, lo=0, hi=1000, lo_open=True, **kw)


def workload_opt(*names: str, help: str = "Workload: catalog name or YAML file.", **kw: Any) -> Any:
    return option(*(names or ("--workload",)), help=help, parser=workload_ref(), metavar="WORKLOAD", **kw)


def model_opt(*names: str, help: str = "Model: catalog name or model file.", **kw: Any) -> Any:
    return option(*(names or ("--model",)), help=help, parser=model_ref(), metavar="MODEL", **kw)
