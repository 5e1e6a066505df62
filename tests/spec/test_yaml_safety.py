"""Safe YAML: aliases, expansion, depth and size are bounded, and a 'billion laughs' document is
refused by those rules before anything is expanded or constructed (timing: bench/bench_errors.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from omniplane.spec import SpecError, load_document, yamlio
from omniplane.spec.yamlio import MAX_ALIASES, MAX_DEPTH, MAX_NODES, MAX_SPEC_BYTES, parse_yaml, read_yaml
from tests.cli.slips import laughs

BOMBS = {
    "top-level": "kind: model\nname: lol\n" + laughs(),
    "inside-x-key": "kind: model\nname: lol\nx-bomb:\n" + laughs(indent="  "),
    "aliased-into-a-field": "kind: model\n" + laughs() + "name: *a9\n",
}


@pytest.fixture
def no_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a document is constructed (expanded into Python objects)."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the document was constructed")

    monkeypatch.setattr(yamlio._Loader, "construct_document", forbidden)


@pytest.mark.parametrize("name", BOMBS)
def test_billion_laughs_refused_before_expansion(tmp_path: Path, name: str, no_construction: None) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(BOMBS[name])
    with pytest.raises(SpecError) as info:
        load_document(path)
    (issue,) = info.value.issues
    assert "billion laughs" in issue.message and f"{MAX_NODES:,}" in issue.message
    assert issue.line is not None and issue.line > 1
    assert str(path) in str(info.value)


def test_bombs_would_expand_far_past_the_limit() -> None:
    assert 1000 * MAX_NODES < 9**9 * 9  # the documents above are real bombs, not near misses


def test_alias_count_is_bounded(no_construction: None) -> None:
    text = "kind: model\nx-a: &a 1\nlist: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(SpecError, match=f"more than {MAX_ALIASES:,} YAML aliases"):
        parse_yaml(text, "f.yaml")


def test_recursive_alias_refused(no_construction: None) -> None:
    with pytest.raises(SpecError, match="recursive"):
        parse_yaml("a: &a [1, *a]\n", "f.yaml")


@pytest.mark.parametrize("text", [
    "a: " + "[" * 10_000 + "]" * 10_000,
    "a: " + "{b: " * 10_000 + "1" + "}" * 10_000,
    "".join(" " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 5)) + " " * (MAX_DEPTH + 5) + "v\n",
    "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, MAX_DEPTH + 5)),
], ids=["flow-sequences", "flow-mappings", "block-mappings", "alias-chain"])
def test_depth_is_bounded(text: str) -> None:
    with pytest.raises(SpecError, match=f"nested more than {MAX_DEPTH} levels"):
        parse_yaml(text, "f.yaml")


def test_size_limit_refused_without_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("kind: model\n# " + "x" * MAX_SPEC_BYTES + "\n")
    monkeypatch.setattr(yamlio, "parse_yaml", lambda *a: pytest.fail("parsed"))
    with pytest.raises(SpecError, match=f"at most {MAX_SPEC_BYTES:,}"):
        read_yaml(path)


def test_anchors_within_bounds_load_as_pyyaml_loads_them() -> None:
    text = ("x-size: &size {params: 1.0e9, layers: 8}\nbase: &base {a: 1, b: [1, 2]}\n"
            "merged: {<<: *base, c: 3}\nuses: [*size, *size]\nsci: [1e9, 2E-3, -4e+2, 1_000, .5]\n")
    data, positions = parse_yaml(text, "f.yaml")
    expected = yaml.safe_load(text)
    # YAML 1.2 floats (PyYAML's YAML 1.1 reads 1.0e9 and 1e9 as strings)
    expected["sci"] = [1e9, 2e-3, -400.0, 1000, 0.5]
    expected["x-size"]["params"] = 1e9
    expected["uses"] = [expected["x-size"]] * 2
    assert data == expected
    assert positions[("merged", "c")] == (3, 24)  # line 3, column of the value 3


def test_catalog_specs_are_within_the_limits() -> None:
    from omniplane.spec.catalog import all_catalog_files

    for path in all_catalog_files():
        assert path.stat().st_size < MAX_SPEC_BYTES / 20
        read_yaml(path)
