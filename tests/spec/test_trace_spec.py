"""Trace arrivals in a workload spec: the trace must exist and the mapping must fit the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from omniplane.spec import SpecError, load_document
from omniplane.spec.catalog import SHIPPED_TRACES, find_trace


def trace_workload(**arrival: Any) -> dict[str, Any]:
    base = {"process": "trace", "trace": "azure-conv", "format": "azure",
            "mapping": {"output_fractions": {"text": 1.0}, "extra_inputs": {"image": 0.5}}}
    base.update(arrival)
    return {"kind": "workload", "name": "w", "model": "qwen3-vl", "arrival": base}


CASES = [
    ("missing-file", trace_workload(trace="nope.csv", format="csv"), "arrival.trace", "no trace 'nope.csv'"),
    ("shipped-format", trace_workload(format="mooncake"), "arrival.format", "has format 'azure'"),
    ("unknown-quantity", trace_workload(mapping={"output_fractions": {"text": 1.0},
                                                 "sizes": {"llm.tokens": "prompt_tokens"}}),
     "arrival.mapping.sizes.llm.tokens", "unknown work quantity 'tokens'"),
    ("no-such-output", trace_workload(mapping={"output_fractions": {"text": 0.5, "audio": 0.5}}),
     "arrival.mapping.output_fractions.audio", "outputs audio"),
    ("rate-and-time-scale", trace_workload(rate=3.0, time_scale=2.0), "arrival.time_scale",
     "either rate or time_scale"),
    ("clients-not-servegen", trace_workload(clients=[1, 2]), "arrival.clients", "clients selects ServeGen"),
]


@pytest.mark.parametrize(("case_id", "doc", "field", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_bad_trace_workloads(tmp_path: Path, case_id: str, doc: dict[str, Any], field: str,
                             fragment: str) -> None:
    path = tmp_path / f"{case_id}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(SpecError) as info:
        load_document(path)
    matching = [i for i in info.value.issues if i.field == field]
    assert matching, info.value.fields
    assert any(fragment in i.message for i in matching), str(info.value)
    assert str(path) in str(info.value)


def test_mix_and_type_assigning_mapping_conflict(tmp_path: Path) -> None:
    doc = trace_workload()
    doc["mix"] = {"t2t": 1.0}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match="keep one"):
        load_document(path)


def test_relative_trace_path_and_shipped_names(tmp_path: Path) -> None:
    (tmp_path / "mine.csv").write_text("arrival_s\n0\n")
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(trace_workload(trace="mine.csv", format="csv")))
    load_document(path)
    for name in SHIPPED_TRACES:
        found, fmt = find_trace(name)
        assert found.exists() and fmt == SHIPPED_TRACES[name][1]
