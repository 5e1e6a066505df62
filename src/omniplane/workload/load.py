"""Find and load a trace by shipped name or path, in any supported format (one factory)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from omniplane.spec.catalog import find_trace
from omniplane.workload.formats import load_azure, load_mooncake, load_user_csv, load_user_jsonl
from omniplane.workload.servegen import load_servegen
from omniplane.workload.trace import Trace

FORMATS = ("azure", "mooncake", "servegen", "csv", "jsonl")


def resolve_trace(ref: str | Path, fmt: str | None = None, base_dir: Path | None = None) -> tuple[Path, str]:
    """(path, format) of a shipped trace name or a file; the format is inferred when not given:
    a folder is ServeGen; a CSV whose header starts with ``TIMESTAMP`` is Azure; a JSONL whose
    first object has ``input_length`` is Mooncake; other CSV / JSONL files are user traces."""
    path, shipped = find_trace(str(ref), base_dir)
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unknown trace format {fmt!r} (expected one of {', '.join(FORMATS)})")
    if fmt is not None:
        return path, fmt
    if shipped is not None:
        return path, shipped
    return path, infer_format(path)


def infer_format(path: Path) -> str:
    if path.is_dir():
        return "servegen"
    with path.open(encoding="utf-8") as f:
        first = f.readline().strip()
    if path.suffix == ".csv":
        return "azure" if first.startswith("TIMESTAMP") else "csv"
    if path.suffix in (".jsonl", ".json"):
        try:
            obj = json.loads(first) if first else {}
        except json.JSONDecodeError:
            obj = {}
        return "mooncake" if isinstance(obj, dict) and "input_length" in obj else "jsonl"
    raise ValueError(f"cannot tell the format of {path}; say it (one of {', '.join(FORMATS)})")


def load_trace(ref: str | Path, fmt: str | None = None, *, base_dir: Path | None = None,
               seed: int = 0) -> Trace:
    """A trace by shipped name (``azure-conv``, ``azure-code``, ``mooncake-conversation``,
    ``servegen-mm-image``) or path. A ServeGen folder holds fitted distributions, so it
    yields one seeded 24-hour realisation of all its clients."""
    path, fmt = resolve_trace(ref, fmt, base_dir)
    if fmt == "azure":
        return load_azure(path)
    if fmt == "mooncake":
        return load_mooncake(path)
    if fmt == "csv":
        return load_user_csv(path)
    if fmt == "jsonl":
        return load_user_jsonl(path)
    return load_servegen(path).sample(np.random.default_rng(seed))
