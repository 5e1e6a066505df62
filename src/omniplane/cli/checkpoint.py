"""Finished points of a long sweep, kept as they finish so an interrupted sweep resumes.

A point log is a JSONL file: a header line naming the sweep's key, then one line per finished
point, appended and flushed to disk as the point finishes. A sweep started again with the same
key reads the points back and runs only the rest. The key covers everything the results depend
on: the sweep's own settings, omniplane's version and a fingerprint of its code and catalog
files (so results of other code are never reused). The default place is the user's cache
folder (``$XDG_CACHE_HOME/omniplane``, else ``~/.cache/omniplane``).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from omniplane import __version__
from omniplane.cli.output import jsonable

CACHE_ENV = "XDG_CACHE_HOME"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 over omniplane's Python sources and catalog specs (a few hundred small files)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(__version__.encode())
    for path in sorted([*root.rglob("*.py"), *(root / "catalog").rglob("*.yaml")]):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def sweep_key(kind: str, settings: dict[str, Any]) -> str:
    text = json.dumps({"kind": kind, "settings": jsonable(settings), "code": code_fingerprint()},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def default_path(kind: str, key: str) -> Path:
    base = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache")
    return base / "omniplane" / kind / f"{key}.jsonl"


class PointLog:
    """Append-only log of one sweep's finished points (see the module docstring)."""

    def __init__(self, path: Path, key: str) -> None:
        # a symbolic link is written through (the link stays), as every output (cli/files.py)
        self.path = Path(os.path.realpath(path)) if path.is_symlink() else path
        self.key = key

    def load(self) -> list[dict[str, Any]]:
        """The points already finished under this key (none when the file is missing, belongs
        to another sweep, or its last line was cut by the interruption)."""
        if not self.path.is_file():
            return []
        points: list[dict[str, Any]] = []
        with self.path.open(encoding="utf-8") as f:
            lines = f.read().splitlines()
        if not lines:
            return []
        try:
            header = json.loads(lines[0])
        except json.JSONDecodeError:
            return []
        if not isinstance(header, dict) or header.get("key") != self.key:
            return []
        for line in lines[1:]:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                break  # a point cut short by the interruption: run it again
            if isinstance(obj, dict):
                points.append(obj)
        return points

    def start(self, kept: list[dict[str, Any]]) -> None:
        """Rewrite the log as its header and the ``kept`` points (dropping a line cut short by
        an interruption), atomically; :meth:`add` appends after them."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with tmp.open("w", encoding="utf-8") as f:
                f.write(json.dumps({"key": self.key, "omniplane": __version__}) + "\n")
                for point in kept:
                    f.write(json.dumps(jsonable(point), allow_nan=False) + "\n")
            os.replace(tmp, self.path)
        except BaseException:  # an interruption or a full disk: no .tmp file left behind
            tmp.unlink(missing_ok=True)
            raise

    def add(self, point: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(jsonable(point), allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
