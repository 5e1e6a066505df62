"""Every number a spec takes is a finite real number in range: each numeric value of valid specs
(a model, a workload, a plan, the GPU catalog) replaced by .inf, .nan, a boolean, 1e300 or a
word is refused at load time, naming the file, the field's line and the field. Numbers follow
YAML 1.2 (``1e9`` and ``1.0e9`` are numbers, which PyYAML's YAML 1.1 reads as strings), and a
quoted number is read as the number it says: a user who writes ``"7e9"`` means a number."""

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
BAD: list[Any] = [float("inf"), float("-inf"), float("nan"), True, False, 1e300, -1e300, "twelve"]


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


@pytest.mark.parametrize(("kind", "loc"), CASES, ids=[f"{k}:{field(loc)}" for k, loc in CASES])
def test_every_number_written_as_a_string_reads_as_that_number(tmp_path: Path, kind: str, loc: Loc) -> None:
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny_model()))
    doc = DOCS[kind]()
    cur: Any = doc
    for part in loc:
        cur = cur[part]
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(replaced(doc, loc, str(cur)), sort_keys=False))
    reference = tmp_path / f"{kind}-reference.yaml"
    reference.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert load_document(path) == load_document(reference)


def _params(tmp_path: Path, text: str) -> Path:
    doc = yaml.safe_dump(tiny_model(), sort_keys=False)
    assert "params: 1000000000.0" in doc
    path = tmp_path / "model.yaml"
    path.write_text(doc.replace("params: 1000000000.0", f"params: {text}", 1))
    return path


@pytest.mark.parametrize("text", ["1.0e9", "1e9", "1E9", "1000000000", "1.0e+9", "'1e9'", '"1.0e9"'])
def test_yaml_1_1_exponents_read_as_numbers(tmp_path: Path, text: str) -> None:
    model = load_document(_params(tmp_path, text))
    assert model.components[1].size.params == 1e9  # type: ignore[union-attr]


def _refused(tmp_path: Path, text: str) -> str:
    """The message of the one issue ``params: TEXT`` raises: it names the file, the field and its
    line."""
    path = _params(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_document(path)
    message = str(info.value)
    assert str(path) in message and "params" in message, message
    assert [issue.line for issue in info.value.issues] == [_line_of(path, "params: " + text)]
    return message


@pytest.mark.parametrize("text", ["true", "false", "yes", "no", "on", "off", "True"])
def test_booleans_are_refused_by_name(tmp_path: Path, text: str) -> None:
    message = _refused(tmp_path, text)
    assert "not a boolean" in message, message


@pytest.mark.parametrize(
    "text", [".inf", "-.inf", ".nan", "inf", "'inf'", "nan", "'NaN'", "Infinity", "1e300", "'1e300'"])
def test_non_finite_and_huge_are_refused(tmp_path: Path, text: str) -> None:
    message = _refused(tmp_path, text)
    assert "finite" in message or "less than or equal to 1e+14" in message, message


def _line_of(path: Path, needle: str) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == needle)
