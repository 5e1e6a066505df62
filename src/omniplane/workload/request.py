"""One request of a run, and the JSONL file that materialises a run's requests for replay."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from omniplane.inputs import MAX_TRACE_BYTES, json_loads, open_input
from omniplane.spec.work import ResolvedWork
from omniplane.workload.trace import MAX_ARRIVAL_S, TraceError, TraceIssue, check_number

NO_META: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Request:
    """A request: when it arrives, its model request type and its resolved per-component work.

    ``id`` runs 0..n-1 in arrival order; ``arrival`` is in seconds from the start of the run;
    ``work`` maps component -> canonical quantity -> value (see :mod:`omniplane.spec.work`);
    ``meta`` holds a trace row's fields (e.g. Mooncake ``hash_ids``) and is empty for
    generated requests.
    """

    id: int
    arrival: float
    type: str
    work: ResolvedWork
    meta: Mapping[str, Any] = field(default_factory=lambda: NO_META)

    def __hash__(self) -> int:  # work and meta are dicts; equal requests share these three
        return hash((self.id, self.arrival, self.type))


def request_to_json(r: Request) -> dict[str, Any]:
    meta = {k: list(v) if isinstance(v, tuple) else v for k, v in r.meta.items()}
    return {"id": r.id, "arrival": r.arrival, "type": r.type, "work": r.work, "meta": meta}


def save_requests(path: str | Path, requests: Iterable[Request]) -> int:
    """Write one JSON object per line (``id, arrival, type, work, meta``); returns the count."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as f:
        for r in requests:
            f.write(json.dumps(request_to_json(r), separators=(",", ":")) + "\n")
            n += 1
    return n


def load_requests(path: str | Path) -> list[Request]:
    """Read a file written by :func:`save_requests` (``omniplane workload sample``).

    Every bad line is reported (file and line) in one :class:`TraceError`, whose ``partial``
    holds the valid requests read.
    """
    path = Path(path)
    out: list[Request] = []
    issues: list[TraceIssue] = []
    last = -math.inf
    with open_input(path, "request file", MAX_TRACE_BYTES) as f:
        for lineno, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                req = _parse_request(json_loads(text))
            except RecursionError:
                issues.append(TraceIssue(lineno, None, "not valid JSON (nested too deeply)"))
                continue
            except (ValueError, TypeError, KeyError) as exc:
                issues.append(TraceIssue(lineno, None, _reason(exc)))
                continue
            if req.arrival < last:
                issues.append(TraceIssue(lineno, "arrival", f"arrival {req.arrival} is before the "
                                                            f"previous request's ({last})"))
                continue
            last = req.arrival
            out.append(req)
    if issues:
        raise RequestFileError(str(path), issues, out)
    return out


class RequestFileError(TraceError):
    """A request file has bad rows: a :class:`TraceError` whose ``partial_requests`` are the
    valid requests read."""

    def __init__(self, file: str, issues: Sequence[TraceIssue], partial_requests: list[Request]) -> None:
        super().__init__(file, issues, kept=len(partial_requests))
        self.partial_requests = partial_requests


def _reason(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"
    if isinstance(exc, KeyError):
        return f"missing key {exc.args[0]!r} (expected id, arrival, type, work)"
    return str(exc)


def _parse_request(obj: Any) -> Request:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    try:
        arrival = check_number(obj["arrival"], hi=MAX_ARRIVAL_S)
    except ValueError as exc:
        raise ValueError(f"arrival: {exc}") from None
    work = obj["work"]
    if not isinstance(work, dict):
        raise ValueError("work must be an object component -> quantity -> number")
    resolved: ResolvedWork = {}
    for comp, qs in work.items():
        if not isinstance(qs, dict):
            raise ValueError(f"work.{comp} must be an object quantity -> number")
        resolved[str(comp)] = {}
        for q, v in qs.items():
            try:
                resolved[str(comp)][str(q)] = check_number(v)
            except ValueError as exc:
                raise ValueError(f"work.{comp}.{q}: {exc}") from None
    meta = obj.get("meta") or {}
    if not isinstance(meta, dict):
        raise ValueError("meta must be an object")
    meta = {k: tuple(v) if isinstance(v, list) else v for k, v in meta.items()}
    return Request(int(obj["id"]), arrival, str(obj["type"]), resolved, meta or NO_META)


def rebase(requests: Sequence[Request], start_s: float = 0.0, end_s: float | None = None) -> list[Request]:
    """The requests arriving in ``[start_s, end_s)``, shifted to start at 0 and renumbered."""
    out = [r for r in requests if r.arrival >= start_s and (end_s is None or r.arrival < end_s)]
    return [Request(i, r.arrival - start_s, r.type, r.work, r.meta) for i, r in enumerate(out)]
