"""Files a command writes: staged while it runs, published only when all of it succeeded.

One rule for every command (``docs/reference/command-line.md``): outputs are written to a staging
folder next to their destination and moved into place (``os.replace``, atomic per file) only at
:meth:`Outputs.commit`, after the whole job succeeded; a failed or interrupted command leaves no
file created or changed. Missing parent folders are created at commit. An existing file is
replaced, and the command says so on stderr (``replaced existing out/plan.yaml``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from omniplane.cli.output import to_json_text

STAGING_PREFIX = ".omniplane-staging-"


def _existing_ancestor(path: Path) -> Path:
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


class Outputs:
    """The outputs of one command run. Use as a context manager: what was not committed when
    the block ends (an error, Ctrl-C) is discarded."""

    def __init__(self, quiet: bool = False) -> None:
        self._staged: list[tuple[Path, Path]] = []  # (staged, final)
        self._dirs: dict[Path, Path] = {}  # existing ancestor -> staging folder
        self.quiet = quiet
        self.written: list[Path] = []

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.discard()

    def _staging(self, final: Path) -> Path:
        anchor = _existing_ancestor(final)
        if anchor not in self._dirs:
            self._dirs[anchor] = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=anchor))
        return self._dirs[anchor]

    def path(self, final: str | Path) -> Path:
        """Where to write (now) the file that will become ``final`` at commit."""
        final = Path(final)
        staged = self._staging(final) / f"{len(self._staged)}-{final.name}"
        self._staged.append((staged, final))
        return staged

    def folder(self, final: str | Path) -> Path:
        """A folder to fill now; each file in it becomes ``final/<name>`` at commit."""
        final = Path(final)
        staged = self._staging(final / "x") / f"{len(self._staged)}-{final.name or 'dir'}"
        staged.mkdir()
        self._staged.append((staged, final))
        return staged

    def text(self, final: str | Path, text: str) -> None:
        self.path(final).write_text(text, encoding="utf-8")

    def json(self, final: str | Path, data: Any) -> None:
        self.text(final, to_json_text(data))

    def commit(self) -> list[Path]:
        """Move every staged output into place; returns the final paths, in order."""
        moves: list[tuple[Path, Path]] = []
        for staged, final in self._staged:
            if staged.is_dir():
                moves += [(f, final / f.name) for f in sorted(staged.iterdir())]
            else:
                moves.append((staged, final))
        for src, dst in moves:
            dst.parent.mkdir(parents=True, exist_ok=True)
            existed = dst.exists()
            if dst.is_dir():
                raise IsADirectoryError(21, "is a folder; not replaced", str(dst))
            os.replace(src, dst)
            self.written.append(dst)
            if existed and not self.quiet:
                sys.stderr.write(f"replaced existing {dst}\n")
        self._staged.clear()
        self.discard()
        return list(self.written)

    def discard(self) -> None:
        for d in self._dirs.values():
            shutil.rmtree(d, ignore_errors=True)
        self._dirs.clear()
        self._staged.clear()


def write_json(path: str | Path, data: Any) -> None:
    """One JSON file written atomically (``Outputs`` for several)."""
    with Outputs() as out:
        out.json(path, data)
        out.commit()

