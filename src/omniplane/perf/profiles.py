"""Measured profile tables: latency by batch and size, interpolated, never extrapolated silently.

File format (CSV, one header row; documented in docs/reference/perf.md, "Profile tables")::

    component,gpu,tp,op,batch,size,latency_ms[,source]

``op`` and the meaning of ``batch`` / ``size`` (latency is one iteration or call):

=========  ======================================  ===========================================
op         batch                                   size
=========  ======================================  ===========================================
prefill    prompts prefilled in the iteration      prompt tokens per prompt
decode     sequences decoding one token each       context tokens per sequence (mean)
encoder    inputs (images, clips, audio files)     LLM tokens produced per input
dit_step   images denoised together                latent tokens per image
vocoder    audio streams voiced together           audio seconds per stream
vae        images decoded together                 output pixels per image
=========  ======================================  ===========================================

Inside the measured grid a query is interpolated linearly in batch and in size (bilinear over
the batch lines that bracket it). Outside it, :meth:`ProfileSet.lookup` reports the nearest
measured point and the cost model either raises or scales the roofline to that point and
records that it did (see :class:`omniplane.perf.costmodel.CostModel`).
"""

from __future__ import annotations

import bisect
import csv
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from omniplane.errors import InputError

OPS = ("prefill", "decode", "encoder", "dit_step", "vocoder", "vae")
COLUMNS = ("component", "gpu", "tp", "op", "batch", "size", "latency_ms")
OPTIONAL = ("source",)


class ProfileFormatError(InputError):
    """A malformed profile table; ``str()`` is ``file:row N:column C: message`` per problem
    (row 1 is the header)."""

    def __init__(self, file: str, problems: Sequence[tuple[int, str, str]]) -> None:
        self.file = file
        self.problems = list(problems)
        super().__init__("\n".join(f"{file}:row {r}:column {c}: {m}" for r, c, m in self.problems))


@dataclass(frozen=True)
class ProfileRow:
    component: str
    gpu: str
    tp: int
    op: str
    batch: int
    size: float
    latency_ms: float
    source: str = ""

    @property
    def group(self) -> tuple[str, str, int, str]:
        return (self.component, self.gpu.lower(), self.tp, self.op)


@dataclass(frozen=True)
class Lookup:
    """Result of a table query: ``inside`` the grid (interpolated) or the nearest measured
    point ``(batch, size)`` and its latency when outside."""

    latency_s: float
    inside: bool
    batch: int
    size: float


class _Grid:
    """One (component, gpu, tp, op) table: batch lines, each sorted by size."""

    def __init__(self, rows: Iterable[ProfileRow]) -> None:
        lines: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for r in rows:
            lines[r.batch].append((r.size, r.latency_ms / 1e3))
        self.batches = sorted(lines)
        self.sizes = {b: [s for s, _ in sorted(lines[b])] for b in self.batches}
        self.lat = {b: [t for _, t in sorted(lines[b])] for b in self.batches}

    def _on_line(self, b: int, size: float) -> float | None:
        xs, ys = self.sizes[b], self.lat[b]
        if size < xs[0] or size > xs[-1]:
            return None
        i = bisect.bisect_left(xs, size)
        if xs[i] == size:
            return ys[i]
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (size - x0) / (x1 - x0)

    def query(self, batch: float, size: float) -> Lookup:
        bs = self.batches
        j = bisect.bisect_left(bs, batch)
        if j < len(bs) and bs[j] == batch:
            v = self._on_line(bs[j], size)
            if v is not None:
                return Lookup(v, True, bs[j], size)
        elif 0 < j < len(bs):
            b0, b1 = bs[j - 1], bs[j]
            v0, v1 = self._on_line(b0, size), self._on_line(b1, size)
            if v0 is not None and v1 is not None:
                return Lookup(v0 + (v1 - v0) * (batch - b0) / (b1 - b0), True, int(batch), size)
        return self.nearest(batch, size)

    def nearest(self, batch: float, size: float) -> Lookup:
        """The measured point closest to the query (batch first, then size, on a log scale)."""
        best: tuple[float, int, int] | None = None
        for b in self.batches:
            for i, s in enumerate(self.sizes[b]):
                d = (math.log(max(batch, 1e-9) / b)) ** 2 + (math.log(max(size, 1e-9) / s)) ** 2
                if best is None or d < best[0]:
                    best = (d, b, i)
        assert best is not None
        _, b, i = best
        return Lookup(self.lat[b][i], False, b, self.sizes[b][i])


class ProfileSet:
    """Profile tables loaded from one or more files; immutable after construction."""

    def __init__(self, rows: Iterable[ProfileRow] = ()) -> None:
        self.rows: tuple[ProfileRow, ...] = tuple(rows)
        groups: dict[tuple[str, str, int, str], list[ProfileRow]] = defaultdict(list)
        for r in self.rows:
            groups[r.group].append(r)
        self._grids = {k: _Grid(v) for k, v in groups.items()}

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return bool(self.rows)

    def groups(self) -> list[tuple[str, str, int, str]]:
        return sorted(self._grids)

    def has(self, component: str, gpu_names: Sequence[str], tp: int, op: str) -> bool:
        return self._grid(component, gpu_names, tp, op) is not None

    def _grid(self, component: str, gpu_names: Sequence[str], tp: int, op: str) -> _Grid | None:
        for g in gpu_names:
            grid = self._grids.get((component, g.lower(), tp, op))
            if grid is not None:
                return grid
        return None

    def lookup(self, component: str, gpu_names: Sequence[str], tp: int, op: str, batch: float,
               size: float) -> Lookup | None:
        """``None`` when no table exists for the group; otherwise see :class:`Lookup`."""
        grid = self._grid(component, gpu_names, tp, op)
        return grid.query(batch, size) if grid is not None else None

    def merged(self, other: ProfileSet) -> ProfileSet:
        """Rows of both; a group present in ``other`` replaces this set's group."""
        replaced = {r.group for r in other.rows}
        return ProfileSet([*(r for r in self.rows if r.group not in replaced), *other.rows])

    # ---- files --------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow([*COLUMNS, *OPTIONAL])
            for r in self.rows:
                w.writerow([r.component, r.gpu, r.tp, r.op, r.batch, _num(r.size),
                            _num(r.latency_ms), r.source])

    @classmethod
    def load(cls, *paths: Path) -> ProfileSet:
        rows: list[ProfileRow] = []
        for p in paths:
            rows.extend(read_rows(p))
        return cls(rows)


def _num(x: float) -> str:
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


def read_rows(path: Path) -> list[ProfileRow]:
    """Parse and validate one table; every problem is reported with its row and column."""
    file = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileFormatError(file, [(0, "-", f"cannot read file: {exc.strerror}")]) from None
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None:
        raise ProfileFormatError(file, [(1, "-", f"empty file; expected header {','.join(COLUMNS)}")])
    header = [h.strip() for h in header]
    problems: list[tuple[int, str, str]] = []
    for col in COLUMNS:
        if col not in header:
            problems.append((1, col, f"missing column; the header must name {', '.join(COLUMNS)}"))
    for col in header:
        if col not in COLUMNS and col not in OPTIONAL:
            problems.append((1, col, f"unknown column; allowed: {', '.join(COLUMNS + OPTIONAL)}"))
    if problems:
        raise ProfileFormatError(file, problems)
    idx = {c: header.index(c) for c in header}
    rows: list[ProfileRow] = []
    seen: dict[tuple[str, str, int, str, int, float], int] = {}
    for n, raw in enumerate(reader, start=2):
        if not raw or all(not c.strip() for c in raw):
            continue
        if len(raw) != len(header):
            problems.append((n, "-", f"expected {len(header)} fields, found {len(raw)}"))
            continue
        row, errs = _parse_row(raw, idx)
        problems += [(n, c, m) for c, m in errs]
        if row is None:
            continue
        key = (*row.group, row.batch, row.size)
        if key in seen:
            problems.append((n, "size", f"duplicate point (component, gpu, tp, op, batch, size) "
                                        f"already given on row {seen[key]}"))
            continue
        seen[key] = n
        rows.append(row)
    if problems:
        raise ProfileFormatError(file, problems)
    return rows


def _parse_row(raw: list[str], idx: dict[str, int]) -> tuple[ProfileRow | None, list[tuple[str, str]]]:
    errs: list[tuple[str, str]] = []

    def get(col: str) -> str:
        return raw[idx[col]].strip()

    def number(col: str, integer: bool) -> float:
        text = get(col)
        try:
            v = float(text)
        except ValueError:
            errs.append((col, f"expected a {'whole ' if integer else ''}number, found {text!r}"))
            return math.nan
        if not math.isfinite(v) or v <= 0:
            errs.append((col, f"expected a finite number > 0, found {text!r}"))
        elif integer and not v.is_integer():
            errs.append((col, f"expected a whole number, found {text!r}"))
        return v

    component, gpu, op = get("component"), get("gpu"), get("op")
    if not component:
        errs.append(("component", "expected a component name, found an empty field"))
    if not gpu:
        errs.append(("gpu", "expected a GPU kind, found an empty field"))
    if op not in OPS:
        errs.append(("op", f"expected one of {', '.join(OPS)}, found {op!r}"))
    tp = number("tp", True)
    if math.isfinite(tp) and tp >= 1 and int(tp) & (int(tp) - 1):
        errs.append(("tp", f"expected a power of two, found {get('tp')!r}"))
    batch = number("batch", True)
    size = number("size", False)
    latency = number("latency_ms", False)
    if errs:
        return None, errs
    source = raw[idx["source"]].strip() if "source" in idx else ""
    return ProfileRow(component, gpu, int(tp), op, int(batch), size, latency, source), errs
