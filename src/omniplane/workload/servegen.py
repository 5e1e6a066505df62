"""The ServeGen multimodal (mm-image) workload: fitted distributions per client, not raw requests.

Each client ``N`` has ``chunk-N-trace.csv`` (no header; one row per 600 s window over 24 h:
window start s, rate req/s, CV of inter-arrival times, pattern ``Gamma``/``Weibull`` (empty
when the window is silent), and the two fitted parameters of that pattern) and
``chunk-N-dataset.json`` (per 6-hour window, the probability mass functions of
``text_tokens``, ``image_tokens``, ``audio_tokens``, ``video_tokens``, ``image_count``,
``audio_count``, ``video_count`` and ``output_tokens``, stored as Python dict strings and
parsed here with :func:`ast.literal_eval`, never ``eval``).

A realisation (:meth:`ServeGen.sample`) draws, per client and 600 s window, a Gamma or Weibull
renewal process with the window's rate and CV (the shape from the CV, see
:mod:`omniplane.workload.arrivals`; the fitted parameters are kept but not used, so each
window's expected count is exactly its published rate x 600 s), and per request draws every
field independently from that client's 6-hour-window PMF (ServeGen publishes marginals only).
``image_tokens`` is read as tokens per image: in every client's PMFs it tops out at exactly
1280 even where requests carry up to 49 images (clients 10, 12, 13), and 1280 is the per-image
token cap of Qwen-VL's default ``max_pixels`` (1280 x 28 x 28). Derived field:
``image_tokens_total`` = ``image_tokens`` x ``image_count``.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omniplane.errors import InputError
from omniplane.workload.arrivals import Renewal
from omniplane.workload.trace import Trace, TraceError, TraceIssue

WINDOW_S = 600.0  # data/servegen-mm-image: rows are 600 s apart
PDF_FIELDS = ("text_tokens", "image_tokens", "audio_tokens", "video_tokens",
              "image_count", "audio_count", "video_count", "output_tokens")
PATTERNS = {"Gamma": "gamma", "Weibull": "weibull", "": ""}
_CHUNK = re.compile(r"^chunk-(\d+)-trace\.csv$")


@dataclass(frozen=True)
class Pmf:
    values: np.ndarray
    probs: np.ndarray

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if len(self.values) == 1:
            return np.full(n, float(self.values[0]))
        return np.asarray(self.values[rng.choice(len(self.values), size=n, p=self.probs)], dtype=float)

    def mean(self) -> float:
        return float(np.dot(self.values, self.probs))


@dataclass(frozen=True)
class Client:
    """One ServeGen client: its 600 s windows and its per-6-hour-window PMFs."""

    id: int
    start: np.ndarray  # window starts, s
    rate: np.ndarray  # req/s
    cv: np.ndarray
    pattern: tuple[str, ...]  # gamma | weibull | "" (silent)
    params: np.ndarray  # (windows, 2) fitted pattern parameters, as published
    pmf_starts: np.ndarray  # starts of the 6-hour PMF windows, s
    pmfs: tuple[dict[str, Pmf], ...]

    def pmf_at(self, t: float) -> dict[str, Pmf]:
        i = int(np.searchsorted(self.pmf_starts, t, side="right")) - 1
        return self.pmfs[max(i, 0)]


@dataclass(frozen=True)
class ServeGen:
    source: str
    clients: tuple[Client, ...]

    @property
    def end_s(self) -> float:
        return float(max(c.start[-1] for c in self.clients) + WINDOW_S)

    def select(self, ids: list[int] | None) -> ServeGen:
        if ids is None:
            return self
        known = {c.id: c for c in self.clients}
        missing = [i for i in ids if i not in known]
        if missing:
            raise InputError(f"{self.source}: no client(s) {missing}; clients are 0..{max(known)}")
        return ServeGen(self.source, tuple(known[i] for i in ids))

    def total_rate(self) -> tuple[np.ndarray, np.ndarray]:
        """(window starts, aggregate published rate of all clients per 600 s window)."""
        starts = np.arange(0.0, self.end_s, WINDOW_S)
        total = np.zeros(len(starts))
        for c in self.clients:
            idx = (c.start // WINDOW_S).astype(int)
            np.add.at(total, idx, c.rate)
        return starts, total

    def mean_rate(self, start_s: float = 0.0, end_s: float | None = None) -> float:
        """Mean aggregate published rate over the windows in ``[start_s, end_s)``."""
        starts, total = self.total_rate()
        end = self.end_s if end_s is None else end_s
        sel = (starts + WINDOW_S > start_s) & (starts < end)
        if not sel.any() or total[sel].sum() <= 0:
            raise InputError(f"{self.source}: no traffic between {start_s} and {end} s")
        return float(total[sel].mean())

    def sample(
        self,
        rng: np.random.Generator,
        *,
        start_s: float = 0.0,
        end_s: float | None = None,
        n: int | None = None,
        rate_scale: float = 1.0,
    ) -> Trace:
        """Requests of every client in ``[start_s, end_s)`` (trace time, s) and/or the first
        ``n`` from ``start_s``; window rates multiplied by ``rate_scale``. Window by window in
        time order, so a cut at ``n`` is exact; asking beyond the 24 h is an error."""
        end = self.end_s if end_s is None else end_s
        if end > self.end_s + 1e-9:
            raise InputError(f"{self.source} covers 0..{self.end_s:.0f} s; asked up to {end:.0f} s")
        parts: list[tuple[np.ndarray, int, dict[str, Pmf]]] = []
        count = 0
        w0 = math.floor(start_s / WINDOW_S) * WINDOW_S
        while w0 < end and (n is None or count < n):
            for c in self.clients:
                i = int(np.searchsorted(c.start, w0))
                if i >= len(c.start) or c.start[i] != w0 or c.rate[i] <= 0 or not c.pattern[i]:
                    continue
                process = Renewal(float(c.rate[i]) * rate_scale, float(c.cv[i]), c.pattern[i])
                t = process.times(rng, w0, w0 + WINDOW_S)
                t = t[(t >= start_s) & (t < end)]
                parts.append((t, c.id, c.pmf_at(w0)))
                count += len(t)
            w0 += WINDOW_S
        if n is not None and end_s is None and count < n:
            raise InputError(f"{self.source} has only {count} requests from {start_s} s to the end; "
                             f"asked for {n}")
        return self._rows(rng, parts, n)

    def _rows(self, rng: np.random.Generator, parts: list[tuple[np.ndarray, int, dict[str, Pmf]]],
              n: int | None) -> Trace:
        arrival = np.concatenate([p[0] for p in parts]) if parts else np.empty(0)
        client = np.concatenate([np.full(len(p[0]), p[1]) for p in parts]) if parts else np.empty(0)
        fields = {f: np.empty(len(arrival)) for f in PDF_FIELDS}
        at = 0
        for t, _, pmfs in parts:
            for f in PDF_FIELDS:
                fields[f][at:at + len(t)] = pmfs[f].sample(rng, len(t))
            at += len(t)
        order = np.argsort(arrival, kind="stable")[:n]
        fields = {k: v[order] for k, v in fields.items()}
        fields["image_tokens_total"] = fields["image_tokens"] * fields["image_count"]
        return Trace(self.source, "servegen", arrival[order], fields,
                     {"client": client[order].astype(int).tolist()}, None)


def load_servegen(directory: str | Path) -> ServeGen:
    """All ``chunk-N-trace.csv`` / ``chunk-N-dataset.json`` pairs of a ServeGen folder."""
    directory = Path(directory)
    ids = sorted(int(m.group(1)) for p in directory.iterdir() if (m := _CHUNK.match(p.name)))
    if not ids:
        raise TraceError(str(directory), [TraceIssue(None, None, "no chunk-N-trace.csv files")])
    return ServeGen(str(directory), tuple(_client(directory, i) for i in ids))


def _client(directory: Path, cid: int) -> Client:
    trace_path = directory / f"chunk-{cid}-trace.csv"
    issues: list[TraceIssue] = []
    rows: list[tuple[float, float, float, str, float, float]] = []
    with trace_path.open(newline="", encoding="utf-8") as f:
        for line, row in enumerate(csv.reader(f), start=1):
            try:
                rows.append(_window_row(row, rows[-1][0] if rows else None))
            except ValueError as exc:
                issues.append(TraceIssue(line, None, str(exc)))
    if issues:
        raise TraceError(str(trace_path), issues)
    data_path = directory / f"chunk-{cid}-dataset.json"
    pmf_starts, pmfs = _pmfs(data_path)
    return Client(
        cid,
        np.array([r[0] for r in rows]),
        np.array([r[1] for r in rows]),
        np.array([r[2] for r in rows]),
        tuple(r[3] for r in rows),
        np.array([[r[4], r[5]] for r in rows]).reshape(-1, 2),
        pmf_starts,
        pmfs,
    )


def _window_row(row: list[str], prev: float | None) -> tuple[float, float, float, str, float, float]:
    if len(row) != 6:
        raise InputError(f"expected 6 cells (start, rate, cv, pattern, param1, param2), got {len(row)}")
    try:
        start, rate, cv, p1, p2 = (float(row[i]) for i in (0, 1, 2, 4, 5))
    except ValueError:
        raise InputError(f"expected numbers in cells 1, 2, 3, 5, 6: {row}") from None
    if row[3] not in PATTERNS:
        raise InputError(f"pattern must be Gamma, Weibull or empty (got {row[3]!r})")
    if rate < 0 or cv < 0 or not (math.isfinite(rate) and math.isfinite(cv)):
        raise InputError(f"rate and cv must be finite and >= 0 (got {rate}, {cv})")
    if rate > 0 and (not row[3] or cv <= 0):
        raise InputError(f"a window with rate {rate} needs a pattern and a cv > 0")
    if prev is not None and start <= prev:
        raise InputError(f"window start {start} is not after the previous one ({prev})")
    return start, rate, cv, PATTERNS[row[3]], p1, p2


def _pmfs(path: Path) -> tuple[np.ndarray, tuple[dict[str, Pmf], ...]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TraceError(str(path), [TraceIssue(None, None, f"cannot read JSON: {exc}")]) from None
    starts = sorted(data, key=float)
    out: list[dict[str, Pmf]] = []
    issues: list[TraceIssue] = []
    for w in starts:
        pmfs: dict[str, Pmf] = {}
        for f in PDF_FIELDS:
            try:
                pmfs[f] = _parse_pmf(data[w].get(f))
            except ValueError as exc:
                issues.append(TraceIssue(None, f"{w}.{f}", str(exc)))
        out.append(pmfs)
    if issues:
        raise TraceError(str(path), issues)
    return np.array([float(s) for s in starts]), tuple(out)


def _parse_pmf(text: object) -> Pmf:
    if not isinstance(text, str):
        raise InputError("missing, or not a dict string")
    try:
        d = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise InputError(f"not a Python dict literal: {text[:60]!r}") from None
    if not isinstance(d, dict) or not d:
        raise InputError("expected a non-empty {value: probability} dict")
    values = np.array([float(v) for v in d], dtype=float)
    probs = np.array([float(p) for p in d.values()], dtype=float)
    if (values < 0).any() or (probs < 0).any() or not np.isfinite(probs).all():
        raise InputError("values and probabilities must be >= 0")
    total = probs.sum()
    if abs(total - 1.0) > 1e-6:
        raise InputError(f"probabilities sum to {total:.8g}, expected 1")
    return Pmf(values, probs / total)
