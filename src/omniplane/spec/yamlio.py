"""Reading YAML safely, with positions: every value's line and column, keyed by its field location.

Safe means bounded: a spec file is at most :data:`MAX_SPEC_BYTES`, a document uses at most
:data:`MAX_ALIASES` aliases, expands (aliases followed) to at most :data:`MAX_NODES` nodes and
nests at most :data:`MAX_DEPTH` levels. The checks run on the composed node graph, where an
alias is a reference to its anchor's node, so a "billion laughs" document (a few lines whose
aliases expand to 10^9 nodes) is refused before anything is expanded, in time linear in its
text. Numbers follow YAML 1.2: ``1e9`` is a float (PyYAML's YAML 1.1 reads it as a string).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from omniplane.inputs import MAX_JSON_INT_DIGITS, InputFileError, json_loads, read_input_text
from omniplane.spec.errors import Loc, SpecError, SpecIssue

Positions = dict[Loc, tuple[int, int]]

MAX_SPEC_BYTES = 2 * 2**20  # assumption: the largest shipped spec is ~10 KB, a plan ~20 KB
MAX_ALIASES = 1_000  # assumption: hand-written specs share a few dozen anchors
MAX_NODES = 200_000  # assumption: 20x the largest shipped spec's ~10^4 nodes, expanded
MAX_DEPTH = 64  # assumption: shipped specs nest 8 levels deep

_FLOAT_12 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+))$""",
    re.X,
)


class _Refused(Exception):
    def __init__(self, message: str, where: yaml.Node | yaml.Event | yaml.Mark) -> None:
        super().__init__(message)
        self.mark = where if isinstance(where, yaml.Mark) else where.start_mark


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that counts aliases while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _Refused(f"more than {MAX_ALIASES:,} YAML aliases (*name); a spec may use at "
                               f"most {MAX_ALIASES:,}", self.peek_event())  # type: ignore[no-untyped-call]
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 1:
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep",
                               self.peek_event())  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # PyYAML's scanner reads ahead over every open '[' / '{' and re-checks each one per
        # token (quadratic in the flow depth): refuse before a deep flow collection is scanned
        if self.flow_level >= MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep", self.get_mark())
        super().fetch_flow_collection_start(token_class)


# exponent floats without a dot (1e9, 2.5E-3 already resolve): YAML 1.2 core schema
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


def _expanded_size(root: yaml.Node) -> None:
    """Refuse a node graph that refers to itself, nests (aliases followed) more than
    :data:`MAX_DEPTH` levels or expands to more than :data:`MAX_NODES` nodes. Memoised per node
    (an anchor is composed before its aliases), so linear in the composed graph."""
    seen: dict[int, tuple[int, int]] = {}  # id -> (expanded size, height)
    open_: set[int] = set()

    def visit(node: yaml.Node) -> tuple[int, int]:
        key = id(node)
        if key in seen:
            return seen[key]
        if key in open_:
            raise _Refused("a YAML alias refers to a node that contains it (a recursive document)",
                           node)
        size, height = 1, 0
        open_.add(key)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        for child in children:
            s, h = visit(child)
            size, height = size + s, max(height, h + 1)
            if size > MAX_NODES:
                raise _Refused(f"the document expands to more than {MAX_NODES:,} values once its "
                               f"aliases are followed (a 'billion laughs' document?); a spec may "
                               f"hold at most {MAX_NODES:,}", child)
            if height > MAX_DEPTH:
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep (aliases followed)", child)
        open_.discard(key)
        seen[key] = (size, height)
        return size, height

    visit(root)


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
    elif node.tag == "tag:yaml.org,2002:int":
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_JSON_INT_DIGITS:  # before int() meets Python's digit limit
            issues.append(SpecIssue(loc, f"a whole number of {digits:,} digits; at most "
                                         f"{MAX_JSON_INT_DIGITS} are taken (every count or size is "
                                         "far smaller)", *pos[loc]))


def _where(mark: Any) -> tuple[int | None, int | None]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (None, None)


def parse_yaml(text: str, file: str | None) -> tuple[Any, Positions]:
    """Parse YAML text; return the data and the position of every value.

    Raises :class:`SpecError` for invalid YAML (with line and column), duplicate keys and
    documents over the limits of this module.
    """
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # a control character: its place, escaped, not the text
        before = text[: exc.position]
        line, col = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        raise SpecError(file, [SpecIssue((), f"invalid YAML: the control character {chr(exc.character)!r} "
                                             "is not allowed in YAML", line, col)]) from None
    try:
        node = loader.get_single_node()
        if node is not None:
            _expanded_size(node)
    except _Refused as exc:
        raise SpecError(file, [SpecIssue((), str(exc), *_where(exc.mark))]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecError(file, [SpecIssue((), f"invalid YAML: {problem}", *_where(mark))]) from None
    except yaml.YAMLError as exc:
        raise SpecError(file, [SpecIssue((), f"invalid YAML: {' '.join(str(exc).split())}")]) from None
    except RecursionError:
        raise SpecError(file, [SpecIssue((), f"nested more than {MAX_DEPTH} levels deep")]) from None
    positions: Positions = {}
    issues: list[SpecIssue] = []
    if node is None:
        return None, positions
    _walk(node, (), positions, issues)
    if issues:
        raise SpecError(file, issues)
    try:
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecError(file, [SpecIssue((), f"invalid YAML: {problem}",
                                         *_where(exc.problem_mark or exc.context_mark))]) from None
    finally:
        loader.dispose()
    return data, positions


def read_text(path: Path, what: str = "spec file", limit: int = MAX_SPEC_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes, read through the shared
    input opener (:mod:`omniplane.inputs`); :class:`SpecError` naming the file when it is
    missing, a folder, a FIFO or device, unreadable, too large or not UTF-8."""
    try:
        return read_input_text(path, what, limit)
    except InputFileError as exc:
        raise SpecError(exc.path, [SpecIssue((), exc.reason)]) from None
    except OSError as exc:
        raise SpecError(str(path), [SpecIssue((), f"cannot read the file: {exc.strerror}")]) from None


def read_yaml(path: Path) -> tuple[Any, Positions]:
    return parse_yaml(read_text(path), str(path))


def load_yaml(path: Path, what: str = "YAML file") -> Any:
    """The data of a YAML (or JSON, by suffix) file read under this module's limits."""
    text = read_text(path, what)
    if path.suffix == ".json":
        return parse_json(text, str(path))
    return parse_yaml(text, str(path))[0]


def parse_json(text: str, file: str | None) -> Any:
    """JSON text; :class:`SpecError` with line and column when invalid or nested too deeply.
    ``NaN`` and ``Infinity`` (not JSON) are refused."""

    try:
        return json_loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(file, [SpecIssue((), f"invalid JSON: {exc.msg}", exc.lineno, exc.colno)]) from None
    except ValueError as exc:
        raise SpecError(file, [SpecIssue((), f"invalid JSON: {exc}")]) from None
    except RecursionError:
        raise SpecError(file, [SpecIssue((), "invalid JSON: nested too deeply")]) from None


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
