"""One way to open a user's input file (spec, trace, calibration, plan, request file).

:func:`open_input` refuses, before reading a byte, what would hang or run away: a FIFO or a
socket (a read would wait for a writer), a device (``/dev/zero`` never ends), a folder, and a
regular file over the reader's size limit. It opens without blocking (``O_NONBLOCK``), checks
the opened file itself (``fstat``: no race with a rename), and says what is wrong with the
user's path. Every file opened here is remembered for the running command
(:func:`was_read`), so an output never replaces one of the command's own inputs.

:func:`quote` shows one offending value in an error message: ``repr``-style (control characters
escaped), cut to a few dozen characters, so a message never echoes a file's other content.

This module imports only :mod:`omniplane.errors`, so every layer may use it.
"""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import IO, Any

from omniplane.errors import InputError

MiB = 1 << 20
# Size limits (bytes) of what each reader takes. Assumptions, far above the shipped files: a
# trace or request file of MAX_REQUESTS (10^6) rows at up to ~1 KiB a row; a calibration or
# other JSON document of measurements at 64 MiB; specs and plans are read under yamlio's 2 MiB.
MAX_TRACE_BYTES = 1024 * MiB
MAX_JSON_BYTES = 64 * MiB
MAX_JSON_INT_DIGITS = 20  # 2^64 has 20 digits; every count or size omniplane takes is below 10^15
QUOTE_CHARS = 40

_read: set[tuple[int, int]] = set()  # (st_dev, st_ino) of the files opened by the running command


class InputFileError(InputError):
    """An input path that cannot be read as the file it should be; the message names it
    (``path``: the path, ``reason``: the message without it)."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def open_input(path: str | Path, what: str = "file", limit: int = MAX_TRACE_BYTES, *,
               binary: bool = False, newline: str | None = None) -> IO[Any]:
    """``path`` opened for reading (text: UTF-8), when it is a regular file of at most ``limit``
    bytes; :class:`InputFileError` naming it otherwise (missing, unreadable, a folder, FIFO,
    socket or device, too large)."""
    name = str(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputFileError(name, f"no such file; expected a {what}") from None
    except PermissionError:
        raise InputFileError(name, f"not readable (permission denied); expected a {what}") from None
    except OSError as exc:
        raise InputFileError(name, f"cannot open it ({exc.strerror}); expected a {what}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(name, f"is {_kind(st.st_mode)}; expected a {what} (a regular file)")
        if st.st_size > limit:
            raise InputFileError(name, f"the file has {st.st_size:,} bytes; a {what} may have at "
                                 f"most {limit:,}")
        os.set_blocking(fd, True)
        _read.add((st.st_dev, st.st_ino))
        raw = io.FileIO(fd, "r", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    buffered = io.BufferedReader(raw)
    if binary:
        return buffered
    return io.TextIOWrapper(buffered, encoding="utf-8", newline=newline)


def read_input_bytes(path: str | Path, what: str = "file", limit: int = MAX_TRACE_BYTES) -> bytes:
    with open_input(path, what, limit, binary=True) as f:
        data: bytes = f.read(limit + 1)
    if len(data) > limit:  # grew while read
        raise InputFileError(path, f"the file has more than {limit:,} bytes; a {what} may have "
                             f"at most {limit:,}")
    return data


def read_input_text(path: str | Path, what: str = "file", limit: int = MAX_TRACE_BYTES) -> str:
    data = read_input_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(path, f"not UTF-8 text (byte {exc.start}); expected a {what}") from None


def was_read(path: str | Path) -> bool:
    """Whether the running command opened ``path`` (the same file, through any link) as input."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in _read


def forget_reads() -> None:
    """A new command starts: no file has been read yet."""
    _read.clear()


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` (control characters escaped) cut to about ``limit`` characters; a long
    whole number says about how many digits it has instead."""
    if isinstance(value, int) and not isinstance(value, bool):
        digits = int(abs(value).bit_length() * 0.30103) + 1
        if digits > limit:
            return f"a whole number of about {digits:,} digits"
    text = repr(value)
    if len(text) > limit:
        more = f", {len(value):,} characters" if isinstance(value, str) else ""
        text = f"{text[:limit]}... (cut{more})"
    return text


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_INT_DIGITS:
        raise ValueError(f"a whole number of {len(text.lstrip('-')):,} digits (at most "
                         f"{MAX_JSON_INT_DIGITS} are taken)")
    return int(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def json_loads(text: str | bytes) -> Any:
    """``json.loads`` for a user's file: integers of at most :data:`MAX_JSON_INT_DIGITS` digits
    (a longer one is a ValueError, not Python's digit-limit error), no NaN / Infinity."""
    return json.loads(text, parse_int=_json_int, parse_constant=_no_constant)
