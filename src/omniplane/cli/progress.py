"""Progress on stderr for anything that can run longer than a few seconds, also under --json.

On a terminal: a rich bar per phase (count, elapsed, ETA). Otherwise (a log file, CI, a pipe):
one plain line when a phase starts, at most one every :data:`LINE_EVERY_S` seconds while it
runs, and one when it ends, so a long command is never silent. ``OMNIPLANE_PROGRESS=0`` turns
it off.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from omniplane.cli.output import err_console

LINE_EVERY_S = 10.0
ENV = "OMNIPLANE_PROGRESS"


def _fmt_s(s: float) -> str:
    s = max(0.0, s)
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class StderrProgress:
    """The pipeline's progress hook (``start(phase, total)``, ``advance(n, info)``, ``end()``)
    drawn on stderr; :meth:`advance` also gives an ETA once something is done."""

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.enabled = os.environ.get(ENV, "1") != "0"
        self.live = self.enabled and sys.stderr.isatty()
        self.bar: Progress | None = None
        self.task: Any = None
        self.phase, self.total, self.done = "", 0, 0
        self.t0 = self.last = 0.0

    def start(self, phase: str, total: int) -> None:
        self.phase, self.total, self.done = phase, max(0, int(total)), 0
        self.t0 = self.last = time.monotonic()
        if not self.enabled:
            return
        if self.live:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                TextColumn("eta"), TimeRemainingColumn(), console=err_console,
                                transient=False)
            self.bar.start()
            self.task = self.bar.add_task(self._name(), total=self.total or None, info="")
        else:
            self._line(f"{self._name()}: {self.total} to do" if self.total else f"{self._name()}: started")

    def advance(self, n: int = 1, info: str = "") -> None:
        self.done += n
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(self.task, advance=n, info=info)
            return
        now = time.monotonic()
        if now - self.last >= LINE_EVERY_S:
            self.last = now
            self._line(self.status(info))

    def end(self) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        else:
            count = f", {self.done}" if self.done == self.total else ""  # a phase may end early (pruning)
            self._line(f"{self._name()}: done{count} in {_fmt_s(time.monotonic() - self.t0)}")

    def status(self, info: str = "") -> str:
        elapsed = time.monotonic() - self.t0
        text = f"{self._name()}: {self.done}/{self.total}" if self.total else f"{self._name()}: {self.done}"
        text += f", {_fmt_s(elapsed)}"
        if self.total and 0 < self.done < self.total:
            text += f", about {_fmt_s(elapsed / self.done * (self.total - self.done))} left"
        return text + (f" ({info})" if info else "")

    def _name(self) -> str:
        return f"{self.label} {self.phase}".strip()

    @staticmethod
    def _line(text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
