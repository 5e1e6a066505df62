"""Map trace rows onto a model's request types and sizes (``TraceMapping`` in the workload spec).

A row's type comes from, in order of precedence:

1. a ``mix`` (given to :func:`omniplane.workload.generate`, or the spec's when the mapping does
   not assign types): drawn per row, independent of the row;
2. ``type_column``: the row's own value, which must name a request type of the model;
3. ``output_fractions``: inputs = text, plus each image / video / audio whose ``<m>_count``
   field is positive in the row, plus each of ``extra_inputs`` drawn with its probability; the
   output is drawn from ``output_fractions``; the type is the one model request type with
   exactly these inputs and that output.

A row that maps to no request type (or to several) is an error naming the file and line.
Sizes: ``sizes`` maps ``component.quantity`` to a trace field; a positive value overrides the
sampled quantity, while zero or a missing value (e.g. the image size of a row whose image came
from ``extra_inputs``) keeps the value sampled from the type's distribution.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from omniplane.errors import InputError
from omniplane.spec.component import Modality
from omniplane.spec.model import ModelSpec
from omniplane.spec.workload import TraceMapping
from omniplane.workload.trace import Trace, TraceError, TraceIssue

INPUT_BITS = {Modality.IMAGE: 1, Modality.VIDEO: 2, Modality.AUDIO: 4}
MAX_ROWS_NAMED = 5


def draw_types(names: list[str], probs: list[float], rng: np.random.Generator, n: int) -> np.ndarray:
    p = np.asarray(probs, dtype=float)
    return np.asarray(names)[rng.choice(len(names), size=n, p=p / p.sum())]


def assign_types(
    trace: Trace,
    model: ModelSpec,
    mapping: TraceMapping | None,
    rng: np.random.Generator,
    mix: Mapping[str, float] | None,
) -> np.ndarray:
    """The request type name of every row (see the module docstring for the rules)."""
    n = len(trace)
    if mix is not None:
        return draw_types(list(mix), list(mix.values()), rng, n)
    if mapping is not None and mapping.type_column:
        return _from_column(trace, model, mapping.type_column)
    if mapping is None or mapping.output_fractions is None:
        raise InputError("trace rows need types: give a mix, a type_column or output_fractions")
    mask = np.zeros(n, dtype=np.int64)
    for m, bit in INPUT_BITS.items():
        count = trace.fields.get(f"{m.value}_count")
        if count is not None:
            mask |= np.where(np.nan_to_num(count) > 0, bit, 0)
    for m in sorted(mapping.extra_inputs, key=list(Modality).index):
        draw = rng.random(n) < mapping.extra_inputs[m]
        if m in INPUT_BITS:
            mask |= np.where(draw, INPUT_BITS[m], 0)
    outputs = list(mapping.output_fractions)
    out = rng.choice(len(outputs), size=n, p=_normalised(list(mapping.output_fractions.values())))
    return _lookup(trace, model, mask, out, outputs)


def _normalised(p: list[float]) -> np.ndarray:
    a = np.asarray(p, dtype=float)
    return np.asarray(a / a.sum())


def _lookup(trace: Trace, model: ModelSpec, mask: np.ndarray, out: np.ndarray,
            outputs: list[Modality]) -> np.ndarray:
    table: dict[tuple[int, Modality], list[str]] = {}
    for rt in model.request_types:
        bits = sum(INPUT_BITS.get(m, 0) for m in rt.inputs)
        table.setdefault((bits, rt.output), []).append(rt.name)
    code = mask * len(outputs) + out
    types = np.empty(len(trace), dtype=object)
    issues: list[TraceIssue] = []
    for c in np.unique(code).tolist():
        bits, o = divmod(c, len(outputs))
        rows = np.flatnonzero(code == c)
        names = table.get((bits, outputs[o]), [])
        if len(names) == 1:
            types[rows] = names[0]
            continue
        ins = ["text", *(m.value for m, b in INPUT_BITS.items() if bits & b)]
        what = (f"no request type of {model.name!r} has inputs {ins} and output {outputs[o].value}"
                if not names else f"inputs {ins} and output {outputs[o].value} match several "
                                  f"request types {names}; use type_column or a mix")
        issues.append(TraceIssue(_line(trace, int(rows[0])), None,
                                 f"{what} ({len(rows)} row(s), e.g. {_rows(trace, rows)}; "
                                 f"types: {', '.join(r.label + '=' + r.name for r in model.request_types)})"))
    if issues:
        raise TraceError(trace.source, issues)
    return types.astype(str)


def _from_column(trace: Trace, model: ModelSpec, column: str) -> np.ndarray:
    values = trace.meta.get(column)
    if values is None:
        raise TraceError(trace.source, [TraceIssue(None, column, f"no column {column!r} for the "
                                                   f"request type (text columns: {list(trace.meta)})")])
    known = set(model.type_names)
    issues = [TraceIssue(_line(trace, i), column, f"{v!r} is not a request type of {model.name!r} "
                                                  f"(expected one of: {', '.join(model.type_names)})")
              for i, v in enumerate(values) if v not in known]
    if issues:
        raise TraceError(trace.source, issues)
    return np.asarray(values, dtype=str)


def _line(trace: Trace, row: int) -> int | None:
    return int(trace.lines[row]) if trace.lines is not None and trace.lines[row] >= 0 else None


def _rows(trace: Trace, rows: np.ndarray) -> str:
    named = [trace.where(int(r)) for r in rows[:MAX_ROWS_NAMED]]
    return ", ".join(named) + (" ..." if len(rows) > MAX_ROWS_NAMED else "")


def given_sizes(trace: Trace, mapping: TraceMapping | None) -> dict[str, dict[str, np.ndarray]]:
    """component -> quantity -> per-row trace values (NaN where the sampled value stays)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for key, field in (mapping.sizes if mapping else {}).items():
        if field not in trace.fields:
            raise TraceError(trace.source, [TraceIssue(None, field, f"mapping.sizes.{key} names field "
                                                       f"{field!r}, which the trace does not have "
                                                       f"(fields: {sorted(trace.fields)})")])
        comp, _, q = key.partition(".")
        values = np.asarray(trace.fields[field], dtype=float)
        out.setdefault(comp, {})[q] = np.where(values > 0, values, np.nan)
    return out
