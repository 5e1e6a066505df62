"""Files a command writes: staged while it runs, published only when all of it succeeded.

One rule for every command (``docs/reference/command-line.md``): outputs are written to a staging
folder next to their destination and moved into place (``os.replace``, atomic per file) only at
:meth:`Outputs.commit`, after the whole job succeeded; a failed or interrupted command leaves no
file created or changed. Missing parent folders are created at commit. An existing regular file
is replaced, and the command says so on stderr (``replaced existing out/plan.yaml``).

What is never replaced: a device node, FIFO, socket or folder (refused, naming the user's path);
a symbolic link (the file it points to is written instead: the link stays); one of the running
command's own input files (:func:`omniplane.inputs.was_read`). Errors name the user's path,
never the staging file's.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from omniplane.cli.errors import STAGED_NAMES, fail
from omniplane.cli.output import to_json_text
from omniplane.inputs import was_read

STAGING_PREFIX = ".omniplane-staging-"
_STOPS = {signal.SIGINT, signal.SIGTERM}


def _existing_ancestor(path: Path) -> Path:
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def target(path: str | Path) -> Path:
    """Where writing ``path`` lands: the file a symbolic link points to (links followed, so
    the link itself is never replaced), else ``path``."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)


def refuse_special(path: str | Path, shown: str | Path | None = None) -> None:
    """A user error unless ``path`` is absent or a regular file (links followed)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        fail(f"{shown or path}: cannot check it ({exc.strerror})")
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or
            stat.S_ISBLK(mode) else None if stat.S_ISREG(mode) else "not a regular file")
    if kind is not None:
        fail(f"{shown or path}: is {kind}; an output is written only to a new or regular file "
             "(omniplane never replaces a device, FIFO, socket or folder)")


class Outputs:
    """The outputs of one command run. Use as a context manager: what was not committed when
    the block ends (an error, Ctrl-C) is discarded."""

    def __init__(self, quiet: bool = False) -> None:
        self._staged: list[tuple[Path, Path, Path]] = []  # (staged, final, as the user named it)
        self._dirs: dict[Path, Path] = {}  # existing ancestor -> staging folder
        self.quiet = quiet
        self.written: list[Path] = []

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if isinstance(exc, OSError) and exc.filename is not None:  # name the user's path
            name = str(exc.filename)
            for staged, _, shown in self._staged:
                if name == str(staged) or name.startswith(f"{staged}{os.sep}"):
                    exc.filename = str(shown) + name[len(str(staged)):]
                    break
        self.discard()

    def _staging(self, final: Path, shown: Path) -> Path:
        anchor = _existing_ancestor(final)
        if anchor not in self._dirs:
            # a SIGINT / SIGTERM between making the folder and recording it would leave it behind
            # (discard removes only recorded folders): both wait until it is recorded
            held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
            try:
                made = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=anchor))
                self._dirs[anchor] = made
                STAGED_NAMES[str(made)] = str(shown)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot write there ({exc.strerror})", str(shown)) from None
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return self._dirs[anchor]

    def _check(self, shown: Path) -> Path:
        real = target(shown)
        refuse_special(real, shown)
        if was_read(real):
            fail(f"{shown}: is one of this command's input files; write the output elsewhere")
        if any(os.path.abspath(real) == os.path.abspath(t) for _, t, _ in self._staged):
            fail(f"{shown}: named as two of this command's outputs")
        return real

    def path(self, final: str | Path) -> Path:
        """Where to write (now) the file that will become ``final`` at commit."""
        shown = Path(final)
        real = self._check(shown)
        staged = self._staging(real, shown) / f"{len(self._staged)}-{real.name}"
        STAGED_NAMES[str(staged)] = str(shown)
        self._staged.append((staged, real, shown))
        return staged

    def folder(self, final: str | Path) -> Path:
        """A folder to fill now; each file in it becomes ``final/<name>`` at commit."""
        shown = Path(final)
        real = Path(os.path.realpath(shown))
        if real.exists() and not real.is_dir():
            fail(f"{shown}: is a file; expected a folder")
        staged = self._staging(real / "x", shown) / f"{len(self._staged)}-{real.name or 'dir'}"
        staged.mkdir()
        STAGED_NAMES[str(staged)] = str(shown)
        self._staged.append((staged, real, shown))
        return staged

    def text(self, final: str | Path, text: str) -> None:
        self.path(final).write_text(text, encoding="utf-8")

    def json(self, final: str | Path, data: Any) -> None:
        self.text(final, to_json_text(data))

    def commit(self) -> list[Path]:
        """Move every staged output into place; returns the final paths, in order."""
        moves: list[tuple[Path, Path, Path]] = []
        for staged, final, shown in self._staged:
            if staged.is_dir():
                for f in sorted(staged.iterdir()):
                    dst = target(final / f.name)
                    refuse_special(dst, shown / f.name)
                    if was_read(dst):
                        fail(f"{shown / f.name}: is one of this command's input files; write the "
                             "output elsewhere")
                    moves.append((f, dst, shown / f.name))
            else:
                refuse_special(final, shown)  # it may have changed while the command ran
                moves.append((staged, final, shown))
        for src, dst, name in moves:
            try:
                dst.parent.mkdir(parents=True, exist_ok=True)
                existed = dst.exists()
                os.replace(src, dst)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(name)) from None
            self.written.append(name)
            if existed and not self.quiet:
                sys.stderr.write(f"replaced existing {name}\n")
        self._staged.clear()
        self.discard()
        return list(self.written)

    def discard(self) -> None:
        for d in self._dirs.values():
            shutil.rmtree(d, ignore_errors=True)
            for key in [k for k in STAGED_NAMES if k.startswith(str(d))]:
                del STAGED_NAMES[key]
        self._dirs.clear()
        self._staged.clear()


def write_json(path: str | Path, data: Any) -> None:
    """One JSON file written atomically (``Outputs`` for several)."""
    with Outputs() as out:
        out.json(path, data)
        out.commit()

