"""The docs' examples run as tests (after SimPy's ``docs/conftest.py``): every ```python block of
README.md and docs/*.md runs in a fresh namespace from the repository root, and every ```yaml
block that is a spec (a top-level ``kind`` of a spec file or an SLO table) loads with the same
validation as a file would. A failure names the file and the line the block starts on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def blocks(lang: str) -> list[Any]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) == lang:
                line = text.count("\n", 0, m.start()) + 1
                out.append(pytest.param(m.group(2), id=f"{doc.relative_to(ROOT)}:{line}"))
    return out


PYTHON = blocks("python")
YAML = blocks("yaml")


def test_the_docs_have_examples() -> None:
    assert len(PYTHON) >= 3 and len(YAML) >= 3


@pytest.mark.parametrize("code", PYTHON)
def test_python_example_runs(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # examples name files relative to the repository root
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})


@pytest.mark.parametrize("text", YAML)
def test_yaml_spec_example_is_valid(text: str) -> None:
    from omniplane.spec import ModelSpec, WorkloadSpec, load_model, parse, resolve_workload
    from omniplane.spec.load import KINDS
    from omniplane.vllm.settings import load_settings, load_slo_table

    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    kind = data.get("kind")
    if kind == "omniplane-slo-table":
        load_slo_table(data)
    elif kind == "workload":
        spec = parse(WorkloadSpec, data, "<doc example>")
        resolve_workload(spec, load_model(spec.model))  # cross-checks against its model
    elif kind in KINDS:
        parse(KINDS[kind], data, "<doc example>")
        if kind == "model":
            assert isinstance(parse(ModelSpec, data), ModelSpec)
    elif "policy" in data or "classes" in data:  # an inline scheduler-settings block
        load_settings({"omniplane": data})
    else:  # a fragment of another format (stage configs): must still be YAML
        assert data
