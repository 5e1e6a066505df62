"""Every number a spec takes is a finite real number in range: each numeric value of valid specs
(a model, a workload, a plan, the GPU catalog) replaced by .inf, .nan, a boolean, 1e300 or a
string is refused at load time, naming the file, the field's line and the field."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from omniplane.spec import SpecError, load_document
from omniplane.spec.yamlio import read_yaml
from tests.spec.builders import tiny_model, tiny_plan, tiny_workload

Loc = tuple[str | int, ...]
BAD: list[Any] = [float("inf"), float("-inf"), float("nan"), True, False, 1e300, -1e300, "12"]


def numbers(doc: Any, loc: Loc = ()) -> Iterator[Loc]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from numbers(v, (*loc, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from numbers(v, (*loc, i))
    elif isinstance(doc, int | float) and not isinstance(doc, bool):
        yield loc


def replaced(doc: Any, loc: Loc, value: Any) -> Any:
    out = copy.deepcopy(doc)
    cur = out
    for part in loc[:-1]:
        cur = cur[part]
    cur[loc[-1]] = value
    return out


def field(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def gpus_doc() -> Any:
    from omniplane.spec import catalog_gpus_path

    data, _ = read_yaml(catalog_gpus_path())
    return {"kind": "gpus", "gpus": data["gpus"][:2]}


DOCS = {"model": tiny_model, "workload": tiny_workload, "plan": tiny_plan, "gpus": gpus_doc}
CASES = [(kind, loc) for kind, make in DOCS.items() for loc in numbers(make())]


def test_the_documents_have_many_numbers() -> None:
    assert len(CASES) >= 50


@pytest.mark.parametrize(("kind", "loc"), CASES, ids=[f"{k}:{field(loc)}" for k, loc in CASES])
def test_every_number_refuses_non_numbers_and_out_of_range(tmp_path: Path, kind: str, loc: Loc) -> None:
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny_model()))
    for i, value in enumerate(BAD):
        path = tmp_path / f"{kind}-{i}.yaml"
        path.write_text(yaml.safe_dump(replaced(DOCS[kind](), loc, value), sort_keys=False))
        with pytest.raises(SpecError) as info:
            load_document(path)
        text = str(info.value)
        assert str(path) in text, text
        assert any(issue.line is not None for issue in info.value.issues), text
        name = str(loc[-1]) if not isinstance(loc[-1], int) else str(loc[-2])
        assert name in text or field(loc[:-1]) in text, f"{value!r} at {field(loc)}:\n{text}"
