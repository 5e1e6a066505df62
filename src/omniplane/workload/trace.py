"""A loaded trace: arrival times plus per-row fields, and the error a malformed trace raises."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from omniplane.errors import InputError
from omniplane.inputs import quote
from omniplane.spec.base import MAX_SECONDS
from omniplane.spec.dist import MAX_WORK

MAX_LISTED = 20  # issues printed in an error message; all are kept on the exception
MAX_VALUE = MAX_WORK  # a row's sizes (tokens, items, seconds...): the spec's bound on work
MAX_ARRIVAL_S = MAX_SECONDS  # a row's arrival time, seconds


def check_number(value: Any, *, hi: float = MAX_VALUE, text: bool = False) -> float:
    """A finite number in ``[0, hi]`` (a string is parsed only when ``text``: CSV cells); a
    ValueError saying what was expected otherwise. Booleans are not numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float | str) or (
            isinstance(value, str) and not text):
        raise ValueError(f"expected a number, got {quote(value)}")
    try:
        x = float(value)
    except (ValueError, OverflowError):
        raise ValueError(f"expected a number, got {quote(value)}") from None
    if not math.isfinite(x):
        raise ValueError(f"expected a finite number, got {quote(value)}")
    if x < 0:
        raise ValueError(f"negative value {quote(value)} (expected a number in [0, {hi:g}])")
    if x > hi:
        raise ValueError(f"expected a number in [0, {hi:g}], got {quote(value)}")
    return x


@dataclass(frozen=True)
class TraceIssue:
    line: int | None  # 1-based line of the file, where known
    column: str | None  # column / key, where known
    message: str

    def render(self, file: str) -> str:
        where = f"{file}:{self.line}" if self.line is not None else file
        return f"{where}: {self.column}: {self.message}" if self.column else f"{where}: {self.message}"


class TraceError(InputError):
    """A trace has bad rows. ``issues`` lists every one with its line; ``partial`` is a
    :class:`Trace` of the valid rows read, so nothing valid is silently lost and nothing bad is
    silently skipped (a request file's error, :class:`omniplane.workload.request.RequestFileError`,
    keeps its valid requests instead; ``kept`` counts them)."""

    def __init__(
        self,
        file: str,
        issues: Sequence[TraceIssue],
        partial: Trace | None = None,
        *,
        kept: int | None = None,
    ) -> None:
        self.file = file
        self.issues = list(issues)
        self.partial = partial
        lines = [i.render(file) for i in self.issues[:MAX_LISTED]]
        if len(self.issues) > MAX_LISTED:
            lines.append(f"{file}: ... and {len(self.issues) - MAX_LISTED} more issue(s)")
        bad_rows = sum(i.line is not None for i in self.issues)
        if partial is not None:
            kept = len(partial)
        if kept is not None:
            lines.append(f"{file}: {bad_rows} bad row(s), {kept} valid row(s) read")
        elif bad_rows > 1:
            lines.append(f"{file}: {bad_rows} bad row(s)")
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Trace:
    """Rows of a trace in arrival order.

    ``arrival``: seconds (non-decreasing); ``fields``: numeric per-row columns under canonical
    names (``prompt_tokens``, ``output_tokens``, ``image_count``, ``text_tokens``, ...; NaN =
    not given); ``meta``: other per-row values (``hash_ids``, ``type``, ``client``);
    ``lines``: the source line of each row (-1 for rows sampled from fitted distributions).
    """

    source: str
    format: str
    arrival: np.ndarray
    fields: Mapping[str, np.ndarray] = field(default_factory=dict)
    meta: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    lines: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.arrival)
        sizes = [(k, len(v)) for k, v in self.fields.items()] + [(k, len(m)) for k, m in self.meta.items()]
        for name, size in sizes:
            if size != n:
                raise ValueError(f"trace column {name!r} has {size} rows, arrival has {n}")

    def __len__(self) -> int:
        return len(self.arrival)

    def where(self, row: int) -> str:
        """``file:line`` of a row (or ``file row i`` when lines are unknown)."""
        if self.lines is not None and self.lines[row] >= 0:
            return f"{self.source}:{int(self.lines[row])}"
        return f"{self.source} row {row}"

    def take(self, index: np.ndarray | slice) -> Trace:
        idx = np.arange(len(self))[index] if isinstance(index, slice) else np.asarray(index)
        return Trace(
            self.source,
            self.format,
            self.arrival[idx],
            {k: v[idx] for k, v in self.fields.items()},
            {k: [v[i] for i in idx.tolist()] for k, v in self.meta.items()},
            None if self.lines is None else self.lines[idx],
        )

    def replay(
        self,
        *,
        start_s: float = 0.0,
        time_scale: float = 1.0,
        duration_s: float | None = None,
        n: int | None = None,
    ) -> Trace:
        """Rows from trace time ``start_s`` on, re-timed to run time ``(t - start_s) * time_scale``
        and cut to run-time ``duration_s`` and/or the first ``n`` (with both: at most ``n``
        within ``duration_s``). Asking, with ``n`` alone, for more rows than the trace has
        after ``start_s`` is an error (a trace is never silently repeated)."""
        first = int(np.searchsorted(self.arrival, start_s, side="left"))
        rest = self.take(slice(first, None))
        t = (rest.arrival - start_s) * time_scale
        keep = len(rest)
        if duration_s is not None:
            keep = int(np.searchsorted(t, duration_s, side="left"))
        if n is not None:
            if n > keep and duration_s is None:
                raise InputError(f"trace {self.source} has {keep} request(s) after {start_s} s; "
                                 f"asked for {n}")
            keep = min(keep, n)
        cut = rest.take(slice(0, keep))
        return Trace(cut.source, cut.format, t[:keep], cut.fields, cut.meta, cut.lines)

    def mean_rate(self, start_s: float = 0.0) -> float:
        """Requests per second from ``start_s`` to the last arrival."""
        t = self.arrival[self.arrival >= start_s]
        if len(t) < 2 or t[-1] <= start_s:
            raise InputError(f"trace {self.source} has too few requests after {start_s} s for a rate")
        return float(len(t) / (t[-1] - start_s))

    def rows(self) -> list[dict[str, Any]]:
        """Every row's fields (NaN left out) and meta, for :attr:`Request.meta`."""
        cols = [(k, v.tolist()) for k, v in self.fields.items()]
        metas = list(self.meta.items())
        out: list[dict[str, Any]] = []
        for i in range(len(self)):
            row = {k: v[i] for k, v in cols if v[i] == v[i]}  # NaN != NaN
            for k, m in metas:
                row[k] = m[i]
            out.append(row)
        return out
