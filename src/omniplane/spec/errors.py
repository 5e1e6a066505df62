"""Errors raised while loading specs: every message names the file, the field and what was expected."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from omniplane.errors import InputError

Loc = tuple[str | int, ...]


def format_loc(loc: Sequence[str | int]) -> str:
    """Render a field location as ``components[3].edges[0].to``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<document>"


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec: where it is and what was expected."""

    loc: Loc
    message: str
    line: int | None = None  # 1-based, where known
    column: int | None = None  # 1-based, where known

    @property
    def field(self) -> str:
        return format_loc(self.loc)

    def render(self, file: str | None) -> str:
        where = file or "<spec>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.field}: {self.message}"


class SpecFieldError(Exception):
    """Raised by validators with exact field locations.

    Deliberately not a ``ValueError``: pydantic passes it through unchanged, so the locations
    (relative to the document root) survive. :func:`omniplane.spec.load` turns it into a
    :class:`SpecError` naming the file.
    """

    def __init__(self, issues: Iterable[tuple[Loc, str]]) -> None:
        self.issues = [SpecIssue(tuple(loc), msg) for loc, msg in issues]
        super().__init__("; ".join(f"{i.field}: {i.message}" for i in self.issues))


class SpecError(InputError):
    """A spec file (or in-memory document) is invalid. ``str()`` lists every issue, one per line."""

    def __init__(self, file: str | None, issues: Sequence[SpecIssue]) -> None:
        self.file = file
        self.issues = list(issues)
        super().__init__("\n".join(i.render(file) for i in self.issues))

    @property
    def fields(self) -> list[str]:
        return [i.field for i in self.issues]
