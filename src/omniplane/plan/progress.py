"""Progress reporting hook of the pipeline (the CLI draws it with rich; tests use none)."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, phase: str, total: int) -> None: ...

    def advance(self, n: int, info: str = "") -> None: ...

    def end(self) -> None: ...


class _Silent:
    def start(self, phase: str, total: int) -> None:
        return None

    def advance(self, n: int, info: str = "") -> None:
        return None

    def end(self) -> None:
        return None


NO_PROGRESS: Progress = _Silent()
