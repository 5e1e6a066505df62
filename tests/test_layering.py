"""The layers: every package imports only packages of lower layers (read from the source with
``ast``), the repro package has no import circle, and the core layers never import torch, CUDA,
vLLM or Ray."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "omniplane"

# Every package (or top-level module) of omniplane, lowest layer first. A package may import the
# packages of lower layers only: not its own layer's others, not a higher one. catalog/ and data/
# hold files, no Python. Why each layer sits where it does:
LAYERS: list[tuple[str, ...]] = [
    ("errors", "policy", "parallel"),  # import nothing of omniplane: the error types, the policy
    #   contract, worker pools that stop with the command
    ("inputs",),  # the one input-file opener: raises errors' InputError
    ("spec",),  # the spec files' models: raise errors, name the policy contract
    ("workload", "perf", "control", "fixture"),  # on spec alone: requests, cost model, control
    #   records, and the tiny test model (fixture imports nothing of omniplane)
    ("sim", "sched", "loadgen"),  # sim prices with perf and replays workload; sched's policies read
    #   perf's costs; loadgen sends workload's requests and times them with perf
    ("plan", "slo", "gpu"),  # plan searches with sim's simulation; slo resolves latency targets (on
    #   the planner's cost table for the 'isolated' policy); gpu applies sched's SM ladder
    ("vllm",),  # the vLLM plugin runs sched's policies on gpu's controls
    ("deploy",),  # plans to running vLLM / Ray Serve: plan, vllm, loadgen, sim, the fixture
    ("fidelity",),  # sim against a live vLLM engine (vllm, loadgen, sim), on the fixture
    ("repro",),  # the papers' experiments, tables, figures: on the product, never under it
    ("cli",),  # the application shell: may import everything
]
LAYER = {pkg: i for i, names in enumerate(LAYERS) for pkg in names}
# Packages of one layer that import each other, each pair with why (a known cut, not a rule): the
# planner resolves its targets with slo, and slo's 'isolated' policy is the planner's own latency
# model on its cost table (slo/resolve.py imports plan/ only inside the functions that need it).
MUTUAL = {frozenset({"plan", "slo"}): "the 'isolated' latency-target policy runs on the planner's cost table"}


def module_name(path: Path) -> str:
    parts = ("omniplane", *path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, mod: str | None = None) -> Iterator[tuple[str, int]]:
    """Every name ``path`` (module ``mod``, by default named by its place under src/) imports,
    absolute (``from a.b import c``: ``a.b.c``, a module or a name in one), with its line: at
    module level, in functions and under ``if TYPE_CHECKING:`` alike."""
    mod = mod or module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([node.module] if node.module else [])])
            yield from ((f"{base}.{a.name}", node.lineno) for a in node.names)


def top(name: str) -> str | None:
    """The package of omniplane that module ``name`` is in (None: not omniplane, or its root)."""
    parts = name.split(".")
    return parts[1] if parts[0] == "omniplane" and len(parts) > 1 else None


def violations(edges: dict[str, list[tuple[str, int]]]) -> list[str]:
    """The imports in ``edges`` (module -> imported modules) that break :data:`LAYERS`."""
    out = []
    for mod, targets in sorted(edges.items()):
        src = top(mod)
        for target, line in targets:
            dst = top(target)
            if src is None or dst is None or dst == src or dst not in LAYER:
                continue
            if frozenset({src, dst}) in MUTUAL and LAYER[src] == LAYER[dst]:
                continue
            if LAYER[dst] >= LAYER[src]:
                rule = (f"{src} and {dst} share layer {LAYERS[LAYER[src]]}" if LAYER[dst] == LAYER[src]
                        else f"{dst} (layer {LAYER[dst]}) is above {src} (layer {LAYER[src]})")
                out.append(f"{mod} line {line}: imports {target}: {rule}; a package imports only lower "
                           "layers (tests/test_layering.py LAYERS)")
    return out


def source_edges() -> dict[str, list[tuple[str, int]]]:
    return {module_name(p): list(imports(p)) for p in sorted(SRC.rglob("*.py"))}


def test_every_package_has_a_layer() -> None:
    found = {p.name for p in SRC.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    found |= {p.stem for p in SRC.glob("*.py") if p.name != "__init__.py"}
    assert sorted(found - LAYER.keys()) == [], "give every package a place in LAYERS"
    assert sorted(LAYER.keys() - found) == [], "LAYERS names a package that does not exist"
    assert len(LAYER) == sum(len(names) for names in LAYERS), "a package is in two layers"


def test_no_package_imports_a_higher_layer() -> None:
    bad = violations(source_edges())
    assert bad == [], "\n".join(bad)


def test_a_product_package_importing_repro_or_fidelity_is_caught() -> None:
    edges = {"omniplane.sched.horizon": [("omniplane.repro.horizon.experiment", 3)],
             "omniplane.deploy.vllm_engine": [("omniplane.fidelity.server", 50)],
             "omniplane.sim.build": [("omniplane.sched", 7)],  # same layer
             "omniplane.cli.app": [("omniplane.repro", 1)],
             "omniplane.repro.exhaust": [("omniplane.plan", 2)]}
    bad = violations(edges)
    assert len(bad) == 3
    fid, dep = LAYER["fidelity"], LAYER["deploy"]
    assert bad[0].startswith("omniplane.deploy.vllm_engine line 50: imports omniplane.fidelity.server: "
                             f"fidelity (layer {fid}) is above deploy (layer {dep})")
    assert "omniplane.sched.horizon line 3" in bad[1]
    assert f"repro (layer {LAYER['repro']}) is above sched (layer {LAYER['sched']})" in bad[1]
    assert "share layer" in bad[2]


def test_imports_are_read_in_functions_and_type_checking_blocks(tmp_path: Path) -> None:
    src = tmp_path / "mod.py"
    src.write_text("from typing import TYPE_CHECKING\n"
                   "if TYPE_CHECKING:\n    from omniplane.repro import horizon\n"
                   "def f() -> None:\n    from ..fidelity import server\n    import omniplane.plan.slo\n"
                   "from . import ladder\n")
    got = sorted(imports(src, "omniplane.sched.x"), key=lambda t: t[1])
    assert got == [("typing.TYPE_CHECKING", 1), ("omniplane.repro.horizon", 3),
                   ("omniplane.fidelity.server", 5), ("omniplane.plan.slo", 6), ("omniplane.sched.ladder", 7)]
    assert len(violations({"omniplane.sched.x": list(imports(src, "omniplane.sched.x"))})) == 3


def test_repro_has_no_import_circle() -> None:
    """experiment -> testbed -> table3 -> experiment was one: the testbed's fit is its own module."""
    edges = {m: {t for t, _ in ts if t.startswith("omniplane.repro.")}
             for m, ts in source_edges().items() if m.startswith("omniplane.repro.")}
    mods = set(edges)

    def resolve(name: str) -> str:  # from module import name -> the module
        return name if name in mods or "." not in name else resolve(name.rpartition(".")[0])

    graph = {m: {resolve(t) for t in ts} - {m} for m, ts in edges.items()}
    done: set[str] = set()

    def visit(m: str, path: tuple[str, ...]) -> None:
        assert m not in path, "import circle: " + " -> ".join((*path[path.index(m):], m))
        if m in done:
            return
        for t in sorted(graph.get(m, ())):
            visit(t, (*path, m))
        done.add(m)

    for m in sorted(graph):
        visit(m, ())

CORE = [
    "omniplane.spec",
    "omniplane.workload",
    "omniplane.perf",
    "omniplane.perf.profiler",
    "omniplane.repro",
    "omniplane.repro.validation.report",
    "omniplane.repro.capacity",
    "omniplane.sched",
    "omniplane.repro.horizon.experiment",
    "omniplane.repro.horizon.testbed_fit",
    "omniplane.sched.serving",
    "omniplane.sched.smsweep",
    "omniplane.vllm.deploy_defaults",
    "omniplane.plan",
    "omniplane.plan.pipeline",
    "omniplane.cli.plan",
    "omniplane.sim",
    "omniplane.control",
    "omniplane.cli.app",
    "omniplane.policy",
    "omniplane.slo.resolve",
    "omniplane.loadgen.client",
    "omniplane.loadgen.metrics",
    "omniplane.deploy.local",
    "omniplane.deploy.cluster",
    "omniplane.deploy.ingress",
    "omniplane.deploy.vllm_omni",
    "omniplane.cli.deploy",
    "omniplane.perf.steptime",
    "omniplane.fidelity",
    "omniplane.fixture",
    "omniplane.fidelity.loop",
    "omniplane.fidelity.schedlive",
    "omniplane.cli.fidelity",
    "omniplane.deploy.vllm_engine",
]
# Integration packages: they drive torch, CUDA, NVML and vLLM, but import them only when a
# backend is constructed or vLLM loads one of their classes by name.
LAZY = [
    "omniplane.gpu",
    "omniplane.gpu.backends",
    "omniplane.gpu.checks",
    "omniplane.gpu.sweep",
    "omniplane.gpu.preprocess",
    "omniplane.gpu.localrun",
    "omniplane.vllm.applier",
    "omniplane.vllm",
    "omniplane.vllm.mixin",
    "omniplane.vllm.worker_mixin",
    "omniplane.vllm.stage_config",
    "omniplane.vllm.omni_patch",
    "omniplane.vllm.lifetime",
    "omniplane.vllm.shmwait",
]
FORBIDDEN = ["torch", "vllm", "ray", "cuda", "pynvml", "vllm_omni"]


@pytest.mark.parametrize("module", CORE + LAZY)
def test_core_import_pulls_in_no_runtime(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"
