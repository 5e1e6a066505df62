"""No import circles between the modules of ``omniplane``.

Every module under ``src/omniplane`` is read with :mod:`ast` (nothing is imported) and every
import in it counts, wherever it stands: at the top, inside a function, or under
``if TYPE_CHECKING:`` (a circle through a type-only import is still two modules that each need
the other). Relative imports are resolved against the module's package; ``from pkg import name``
imports the submodule ``pkg.name`` where there is one, else ``pkg`` itself; importing a package
means importing its ``__init__``. The strongly connected components of more than one module
are the circles.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "omniplane"

# Circles that are known and being removed elsewhere; each entry says by what. An entry that no
# longer matches a circle fails the test too, so that it is removed with the circle.
ALLOWED: dict[frozenset[str], str] = {
}


def module_files() -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file under ``src/omniplane`` (a package is its
    ``__init__``)."""
    out = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The ``omniplane`` modules that module ``name`` (file ``path``) imports, anywhere in it."""
    out: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package(name, path).split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target not in modules:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in modules else target)
    out.discard(name)
    return out


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    names = set(files)
    return {name: imports_of(name, path, names) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def _describe(comp: frozenset[str], graph: dict[str, set[str]]) -> str:
    edges = [f"{a} -> {b}" for a in sorted(comp) for b in sorted(graph[a] & comp)]
    return "{" + ", ".join(sorted(comp)) + "}\n    " + "\n    ".join(edges)


def test_cycle_finder_finds_a_circle_and_its_members() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


def test_imports_resolve_relative_and_submodule_names(tmp_path: Path) -> None:
    pkg = tmp_path / "omniplane" / "p"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from .b import x\n"
        "from omniplane import p\n"
        "if TYPE_CHECKING:\n    from omniplane.p import c\n"
        "def f():\n    import omniplane.q\n"
    )
    names = {"omniplane", "omniplane.p", "omniplane.p.a", "omniplane.p.b", "omniplane.p.c", "omniplane.q"}
    assert imports_of("omniplane.p", pkg / "__init__.py", names) == {"omniplane.p.a"}
    assert imports_of("omniplane.p.a", pkg / "a.py", names) == {
        "omniplane.p.b", "omniplane.p", "omniplane.p.c", "omniplane.q"}


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the whole package was read
    found = cycles(graph)
    bad = [c for c in found if c not in ALLOWED]
    assert not bad, "import circles:\n" + "\n".join(_describe(c, graph) for c in bad)
    stale = [why for c, why in ALLOWED.items() if c not in found]
    assert not stale, f"allow-list entries that match no circle any more (remove them): {stale}"
