"""Find and load a trace by shipped name or path, in any supported format (one factory)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from omniplane.errors import InputError, unknown_name
from omniplane.inputs import MAX_TRACE_BYTES, json_loads, open_input
from omniplane.spec.catalog import find_trace
from omniplane.workload.formats import load_azure, load_mooncake, load_user_csv, load_user_jsonl
from omniplane.workload.servegen import load_servegen
from omniplane.workload.trace import Trace, TraceError, TraceIssue

FORMATS = ("azure", "mooncake", "servegen", "csv", "jsonl")


def resolve_trace(ref: str | Path, fmt: str | None = None, base_dir: Path | None = None) -> tuple[Path, str]:
    """(path, format) of a shipped trace name or a file; the format is inferred when not given:
    a folder is ServeGen; a CSV whose header starts with ``TIMESTAMP`` is Azure; a JSONL whose
    first object has ``input_length`` is Mooncake; other CSV / JSONL files are user traces."""
    path, shipped = find_trace(str(ref), base_dir)
    if fmt is not None and fmt not in FORMATS:
        raise unknown_name("trace format", fmt, FORMATS)
    if fmt is not None:
        return path, fmt
    if shipped is not None:
        return path, shipped
    return path, infer_format(path)


def infer_format(path: Path) -> str:
    if path.is_dir():
        return "servegen"
    try:
        with open_input(path, "trace file", MAX_TRACE_BYTES) as f:
            first = f.readline(1 << 16).strip()
    except UnicodeDecodeError as exc:
        raise TraceError(str(path), [TraceIssue(1, None, f"not UTF-8 text (byte {exc.start})")]) from None
    if path.suffix == ".csv":
        return "azure" if first.startswith("TIMESTAMP") else "csv"
    if path.suffix in (".jsonl", ".json"):
        try:
            obj = json_loads(first) if first else {}
        except (ValueError, RecursionError):  # the loader reports the line
            obj = {}
        return "mooncake" if isinstance(obj, dict) and "input_length" in obj else "jsonl"
    raise InputError(f"{path}: cannot tell the format of this trace from its name; say it (one of "
                     f"{', '.join(FORMATS)})")


def load_trace(ref: str | Path, fmt: str | None = None, *, base_dir: Path | None = None,
               seed: int = 0) -> Trace:
    """A trace by shipped name (``azure-conv``, ``azure-code``, ``mooncake-conversation``,
    ``servegen-mm-image``) or path. A ServeGen folder holds fitted distributions, so it
    yields one seeded 24-hour realisation of all its clients."""
    path, fmt = resolve_trace(ref, fmt, base_dir)
    if fmt == "servegen":
        return load_servegen(path).sample(np.random.default_rng(seed))
    if path.is_dir():
        raise TraceError(str(path), [TraceIssue(None, None, f"is a folder; a {fmt} trace is a file")])
    loader = {"azure": load_azure, "mooncake": load_mooncake, "csv": load_user_csv, "jsonl": load_user_jsonl}
    try:
        return loader[fmt](path)
    except UnicodeDecodeError as exc:
        raise TraceError(str(path), [TraceIssue(None, None, f"not UTF-8 text (byte {exc.start})")]) from None
    except csv.Error as exc:
        raise TraceError(str(path), [TraceIssue(None, None, f"not a CSV file: {exc}")]) from None
    except OSError as exc:
        issue = TraceIssue(None, None, f"cannot read the file: {exc.strerror}")
        raise TraceError(str(path), [issue]) from None
