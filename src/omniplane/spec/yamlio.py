"""YAML reading with positions: every value's line and column, keyed by its field location."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from omniplane.spec.errors import Loc, SpecError, SpecIssue

Positions = dict[Loc, tuple[int, int]]


def _walk(node: yaml.Node, loc: Loc, pos: Positions, issues: list[SpecIssue]) -> None:
    pos[loc] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                issues.append(
                    SpecIssue((*loc, key), f"duplicate key {key!r} (first on line {seen[key]})",
                              line, key_node.start_mark.column + 1)
                )
            seen.setdefault(key, line)
            _walk(value_node, (*loc, key), pos, issues)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*loc, i), pos, issues)


def parse_yaml(text: str, file: str | None) -> tuple[Any, Positions]:
    """Parse YAML text; return the data and the position of every value.

    Raises :class:`SpecError` for invalid YAML (with line and column) and duplicate keys.
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecError(file, [SpecIssue((), f"invalid YAML: {problem}", line, col)]) from None
    except yaml.YAMLError as exc:
        raise SpecError(file, [SpecIssue((), f"invalid YAML: {exc}")]) from None
    positions: Positions = {}
    issues: list[SpecIssue] = []
    if node is not None:
        _walk(node, (), positions, issues)
    if issues:
        raise SpecError(file, issues)
    return data, positions


def read_yaml(path: Path) -> tuple[Any, Positions]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(str(path), [SpecIssue((), "file not found")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(path), [SpecIssue((), f"cannot read file: {exc}")]) from None
    return parse_yaml(text, str(path))


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
