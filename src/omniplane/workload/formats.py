"""Request-level trace files: Azure LLM 2023 CSV, Mooncake JSONL, and a user's own CSV/JSONL.

Canonical fields (``Trace.fields``): ``prompt_tokens`` and ``output_tokens`` for the Azure
(``ContextTokens``, ``GeneratedTokens``) and Mooncake (``input_length``, ``output_length``)
traces; a user trace keeps its own column names. Times are seconds: Azure timestamps from the
first request, Mooncake milliseconds / 1000, a user trace's ``arrival_s`` as written.

Every row is checked: a missing column, a bad number, a negative length, a timestamp before
the previous row's or a bad JSON line is an issue naming the file and line. All issues are
collected and raised together as one :class:`TraceError` whose ``partial`` holds the valid
rows read.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from omniplane.inputs import MAX_TRACE_BYTES, json_loads, open_input, quote
from omniplane.workload.trace import MAX_ARRIVAL_S, MAX_VALUE, Trace, TraceError, TraceIssue, check_number

AZURE_COLUMNS = {"TIMESTAMP": None, "ContextTokens": "prompt_tokens", "GeneratedTokens": "output_tokens"}
MOONCAKE_KEYS = {"timestamp": None, "input_length": "prompt_tokens", "output_length": "output_tokens"}
USER_TIME = "arrival_s"
USER_TEXT = ("type", "id")  # text columns of a user trace; so is any column starting with "x_"


class _Rows:
    """Collects valid rows and issues; checks that arrivals never go backwards."""

    def __init__(self, source: str, fmt: str) -> None:
        self.source, self.format = source, fmt
        self.arrival: list[float] = []
        self.lines: list[int] = []
        self.fields: dict[str, list[float]] = {}
        self.meta: dict[str, list[Any]] = {}
        self.issues: list[TraceIssue] = []

    def issue(self, line: int | None, column: str | None, message: str) -> None:
        self.issues.append(TraceIssue(line, column, message))

    def add(self, line: int, arrival: float, time_column: str,
            fields: dict[str, float], meta: dict[str, Any]) -> None:
        if self.arrival and arrival < self.arrival[-1]:
            self.issue(line, time_column, f"timestamp {arrival:.6f} s is before the previous "
                                          f"valid row's ({self.arrival[-1]:.6f} s); rows must be "
                                          "in arrival order")
            return
        n = len(self.arrival)
        for k in fields.keys() - self.fields.keys():
            self.fields[k] = [math.nan] * n
        for k in meta.keys() - self.meta.keys():
            self.meta[k] = [None] * n
        for k, col in self.fields.items():
            col.append(fields.get(k, math.nan))
        for k, mcol in self.meta.items():
            mcol.append(meta.get(k))
        self.arrival.append(arrival)
        self.lines.append(line)

    def trace(self) -> Trace:
        return Trace(
            self.source,
            self.format,
            np.asarray(self.arrival, dtype=float),
            {k: np.asarray(v, dtype=float) for k, v in self.fields.items()},
            dict(self.meta),
            np.asarray(self.lines, dtype=np.int64),
        )

    def finish(self) -> Trace:
        trace = self.trace()
        if self.issues:
            raise TraceError(self.source, self.issues, partial=trace)
        if len(trace) == 0:
            raise TraceError(self.source, [TraceIssue(None, None, "the trace has no rows")], trace)
        return trace


def _number(text: Any, column: str, *, time: bool = False) -> float:
    """A finite number in range (an arrival time or a size); ValueError with the reason."""
    return check_number(text, hi=MAX_ARRIVAL_S if time else MAX_VALUE, text=True)


def _csv_rows(path: Path, required: list[str], rows: _Rows) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) for each data row; a missing required column ends the file with an issue."""
    with open_input(path, "trace file", MAX_TRACE_BYTES, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:  # the header is not echoed: the file may be anything (/etc/passwd)
            rows.issue(1, ", ".join(missing), f"missing column(s) {', '.join(map(repr, missing))}: the "
                                              f"first line is the header and has {len(header)} "
                                              "column(s), none of them named so")
            return
        for row in reader:
            line = reader.line_num
            if None in row:
                rows.issue(line, None, f"{len(header) + len(row[None])} cells, the header has {len(header)}")
                continue
            if any(v is None for v in row.values()):
                rows.issue(line, None, f"too few cells (the header has {len(header)})")
                continue
            yield line, row


def load_azure(path: Path) -> Trace:
    """Azure LLM inference trace 2023: ``TIMESTAMP,ContextTokens,GeneratedTokens``."""
    rows = _Rows(str(path), "azure")
    first: datetime | None = None
    for line, row in _csv_rows(path, list(AZURE_COLUMNS), rows):
        try:
            ts = datetime.fromisoformat(row["TIMESTAMP"].strip())
        except ValueError:
            rows.issue(line, "TIMESTAMP", f"not a timestamp: {quote(row['TIMESTAMP'])}")
            continue
        if first is not None and (ts.tzinfo is None) != (first.tzinfo is None):
            rows.issue(line, "TIMESTAMP", f"{quote(row['TIMESTAMP'].strip())} "
                                          f"{'has no' if ts.tzinfo is None else 'has a'} timezone, the "
                                          f"first row's {'has one' if first.tzinfo else 'has none'}; "
                                          "give every timestamp a timezone or none")
            continue
        fields: dict[str, float] = {}
        for col, name in AZURE_COLUMNS.items():
            if name is None:
                continue
            try:
                fields[name] = _number(row[col], col)
            except ValueError as exc:
                rows.issue(line, col, str(exc))
        if len(fields) < 2:
            continue
        first = first or ts
        rows.add(line, (ts - first).total_seconds(), "TIMESTAMP", fields, {})
    return rows.finish()


def _json_lines(path: Path, rows: _Rows) -> Iterator[tuple[int, dict[str, Any]]]:
    with open_input(path, "trace file", MAX_TRACE_BYTES) as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                obj = json_loads(text)
            except json.JSONDecodeError as exc:
                msg = exc.msg.removesuffix(" at")
                rows.issue(line, None, f"not valid JSON ({msg} at column {exc.colno})")
                continue
            except RecursionError:
                rows.issue(line, None, "not valid JSON (nested too deeply)")
                continue
            except ValueError as exc:  # an integer over the digit limit, NaN, Infinity
                rows.issue(line, None, f"not valid JSON here: {exc}")
                continue
            if not isinstance(obj, dict):
                rows.issue(line, None, f"expected a JSON object, got {type(obj).__name__}")
                continue
            yield line, obj


def load_mooncake(path: Path) -> Trace:
    """Mooncake trace JSONL: ``timestamp`` (ms), ``input_length``, ``output_length``,
    ``hash_ids`` (one id per 512-token block; requests sharing a prefix share ids)."""
    rows = _Rows(str(path), "mooncake")
    for line, obj in _json_lines(path, rows):
        missing = [k for k in MOONCAKE_KEYS if k not in obj]
        if missing:
            rows.issue(line, ", ".join(missing), f"missing key(s) {missing}")
            continue
        values: dict[str, float] = {}
        for key in MOONCAKE_KEYS:
            try:
                values[key] = _number(obj[key], key, time=key == "timestamp")
            except ValueError as exc:
                rows.issue(line, key, str(exc))
        if len(values) < len(MOONCAKE_KEYS):
            continue
        hash_ids = obj.get("hash_ids", [])
        if not isinstance(hash_ids, list) or not all(isinstance(h, int) for h in hash_ids):
            rows.issue(line, "hash_ids", "expected a list of integers")
            continue
        fields = {name: values[k] for k, name in MOONCAKE_KEYS.items() if name is not None}
        rows.add(line, values["timestamp"] / 1000.0, "timestamp", fields, {"hash_ids": tuple(hash_ids)})
    return rows.finish()


def _is_text(column: str) -> bool:
    return column in USER_TEXT or column.startswith("x_")


def load_user_csv(path: Path) -> Trace:
    """A user's CSV (see docs/reference/workloads.md): ``arrival_s`` required; ``type``, ``id`` and
    ``x_*`` columns are text; every other column is a number >= 0 (an empty cell: not given)."""
    rows = _Rows(str(path), "csv")
    for line, row in _csv_rows(path, [USER_TIME], rows):
        fields: dict[str, float] = {}
        meta: dict[str, Any] = {}
        bad = False
        for col, cell in row.items():
            if _is_text(col):
                meta[col] = cell
            elif col == USER_TIME or cell.strip():
                try:
                    fields[col] = _number(cell, col, time=col == USER_TIME)
                except ValueError as exc:
                    rows.issue(line, col, str(exc))
                    bad = True
        if not bad:
            rows.add(line, fields.pop(USER_TIME), USER_TIME, fields, meta)
    return rows.finish()


def load_user_jsonl(path: Path) -> Trace:
    """A user's JSONL: one object per line with ``arrival_s``; numbers >= 0 are fields,
    strings and lists (e.g. ``hash_ids``) are kept as meta."""
    rows = _Rows(str(path), "jsonl")
    for line, obj in _json_lines(path, rows):
        if USER_TIME not in obj:
            rows.issue(line, USER_TIME, f"missing key {USER_TIME!r}")
            continue
        fields: dict[str, float] = {}
        meta: dict[str, Any] = {}
        bad = False
        for key, value in obj.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and not _is_text(key):
                try:
                    fields[key] = _number(value, key, time=key == USER_TIME)
                except ValueError as exc:
                    rows.issue(line, key, str(exc))
                    bad = True
            elif key == USER_TIME or isinstance(value, bool):
                what = "a number" if key == USER_TIME else "a number, a string or a list (not a boolean)"
                rows.issue(line, key, f"expected {what}, got {quote(value)}")
                bad = True
            else:
                meta[key] = tuple(value) if isinstance(value, list) else value
        if not bad:
            rows.add(line, fields.pop(USER_TIME), USER_TIME, fields, meta)
    return rows.finish()
