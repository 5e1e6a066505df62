"""The simulator's hot modules compiled with mypyc: a speed-up with identical results.

``make run`` and ``make test`` run this file as a script before anything else (``python
src/omniplane/sim/native.py``): it compiles :data:`MODULES` with mypyc into
``<venv>/omniplane-native/<stamp>/`` once per change of their sources and is a no-op (a hash of a
few dozen files) otherwise. If the build cannot be made it says so loudly, records why
(``<stamp>.failed``) and everything runs as plain Python: the same sources, the same results,
slower. ``make sim-compiled`` retries a failed build.

On import, ``omniplane.sim`` (:func:`activate`) uses a build only while the files it was
compiled from are byte for byte what they were: the compiled modules and every module of the
package they import, directly or not (mypyc compiles against their types), recorded in the
build's ``SOURCES``; after any edit of one of them it runs plain Python until the next ``make``.
``OMNIPLANE_PURE_PYTHON=1`` runs plain Python regardless.

The compiled modules run the same operations in the same order on the same IEEE doubles and
Python integers, so a run gives bit-identical results either way (``tests/sim/test_native.py``
compares them whenever a build exists, and fails where a toolchain exists but the sources no
longer compile).

This module imports nothing outside the standard library (mypyc itself only inside
:func:`build`), so the Makefile can run it as a script without importing the package.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import MutableSequence
from contextlib import chdir
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent  # .../omniplane/sim
TOP = PACKAGE.parent.parent  # the directory holding the omniplane package
# The modules on the per-event path (``bench_sim_plan.py``'s profile) and the per-request
# records a run ends with; the rest of the package (build, metrics, queueing, colocate, gpu,
# trace) runs once per run or only on shared GPUs, and compiling it would lengthen the build.
MODULES = ("eventloop", "job", "walk", "request", "engines", "llm", "executor", "stats", "topology",
           "simulator", "records")
GROUP = "omniplane_sim_native"  # the shared library mypyc builds for the group
PURE_ENV = "OMNIPLANE_PURE_PYTHON"
TOOLCHAIN, COMPILE = "toolchain", "compile"  # why a build failed: no compiler / the sources


def _module_file(name: str) -> Path | None:
    rel = Path(*name.split("."))
    for cand in (TOP / rel.with_suffix(".py"), TOP / rel / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def sources() -> list[Path]:
    """The compiled modules and, transitively, every module of the package they import (with
    their packages' ``__init__``), sorted: what a build depends on."""
    todo = [f"omniplane.sim.{m}" for m in MODULES]
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name)
        if path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                todo.extend(a.name for a in node.names if a.name.split(".")[0] == "omniplane")
            elif (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                  and node.module.split(".")[0] == "omniplane"):
                todo.append(node.module)
                todo.extend(f"{node.module}.{a.name}" for a in node.names)  # submodules
    return sorted(seen.values())


def _digest(files: list[Path]) -> str:
    where = f"{sys.version_info[:2]} {sysconfig.get_platform()} {sys.implementation.name}"
    h = hashlib.sha256(where.encode())
    h.update(" ".join(MODULES).encode())
    for src in files:
        h.update(src.relative_to(TOP).as_posix().encode())
        h.update(src.read_bytes())
    return h.hexdigest()[:20]


def stamp() -> str:
    """What a build is valid for: its sources (:func:`sources`), the Python version and the platform."""
    return _digest(sources())


def root() -> Path:
    return Path(sys.prefix) / "omniplane-native"


def location(tag: str | None = None) -> Path:
    return root() / (tag or stamp())


def current() -> Path | None:
    """The build made from the files as they are now, if any (checked against its ``SOURCES``)."""
    base = root()
    if not base.is_dir():
        return None
    for target in base.iterdir():
        listed = target / "SOURCES"
        if not (target / "STAMP").is_file() or not listed.is_file():
            continue
        files = [TOP / line for line in listed.read_text().split()]
        if all(f.is_file() for f in files) and _digest(files) == target.name:
            return target
    return None


def activate(package_path: MutableSequence[str]) -> bool:
    """Put a matching build first on ``omniplane.sim``'s module path (called by its __init__)."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return False
    target = current()
    if target is None or not (target / "omniplane" / "sim").is_dir():
        return False
    if str(target) not in sys.path:
        sys.path.append(str(target))  # the group's shared library is a top-level module
    package_path.insert(0, str(target / "omniplane" / "sim"))
    return True


def active() -> bool:
    """Whether this process runs the compiled modules."""
    origin = getattr(importlib.import_module("omniplane.sim.eventloop"), "__file__", "") or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def failure(tag: str | None = None) -> tuple[str, str] | None:
    """``(kind, reason)`` of a failed build for these sources, if one was recorded."""
    marker = root() / f"{tag or stamp()}.failed"
    if not marker.is_file():
        return None
    kind, _, reason = marker.read_text().partition("\n")
    return kind, reason.strip()


def missing_toolchain() -> str | None:
    """What a build needs and this machine lacks (mypyc, a C compiler, the Python headers)."""
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (pip install 'omniplane[native]')"
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(os.environ.get("CC", cc).split()[0]) is None:
        return f"no C compiler ({cc!r} is not on PATH)"
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        return f"no Python headers ({include / 'Python.h'} is missing)"
    return None


def build() -> Path:
    """Compile :data:`MODULES` into :func:`location`; returns it. Raises if mypyc or a C compiler
    is missing or the sources do not compile (the caller falls back to plain Python)."""
    from mypyc.build import mypycify  # mypy's compiler: the `native` extra
    from setuptools import Distribution  # type: ignore[import-untyped]

    files = sources()
    tag = _digest(files)
    target = location(tag)
    if (target / "STAMP").is_file():
        return target
    with tempfile.TemporaryDirectory(prefix="omniplane-native-") as tmp:
        out = Path(tmp) / "lib"
        with chdir(TOP):
            args = [f"--cache-dir={Path(tmp) / 'cache'}", *(f"omniplane/sim/{m}.py" for m in MODULES)]
            exts = mypycify(args, opt_level="3", group_name=GROUP, target_dir=str(Path(tmp) / "c"))
            for ext in exts if sys.platform != "win32" else ():  # no fused multiply-add (doubles as Python's)
                ext.extra_compile_args = [*(ext.extra_compile_args or []), "-ffp-contract=off"]
            dist = Distribution({"name": GROUP, "ext_modules": exts, "script_name": "setup.py"})
            cmd = dist.get_command_obj("build_ext")
            cmd.build_lib, cmd.build_temp, cmd.inplace = str(out), str(Path(tmp) / "obj"), False
            dist.run_command("build_ext")
        staged = target.with_name(tag + ".partial")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(out, staged)
        (staged / "SOURCES").write_text("".join(f"{f.relative_to(TOP).as_posix()}\n" for f in files))
        (staged / "STAMP").write_text(tag + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
    for old in target.parent.iterdir():  # builds and failures of other sources
        if old != target:
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)
    return target


def _loud(lines: list[str]) -> None:
    bar = "!" * 100
    print("\n".join([bar, *(f"!! {line}" for line in lines), bar]), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Build if the sources changed; on failure say so loudly, record why and return 0: the
    simulator then runs as plain Python. ``--retry`` rebuilds after a recorded failure;
    ``--strict`` returns 1 on failure (``make sim-compiled``)."""
    args = sys.argv[1:] if argv is None else argv
    strict, retry = "--strict" in args, "--retry" in args or "--strict" in args
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        print(f"{PURE_ENV} is set: the simulator runs as plain Python (no compiled build)")
        return 0
    files = sources()
    tag = _digest(files)
    if (location(tag) / "STAMP").is_file():
        return 0  # up to date: nothing to say
    failed = None if retry else failure(tag)
    if failed is None:
        reason = missing_toolchain()
        if reason is None:
            print(f"compiling the simulator's hot modules with mypyc ({', '.join(MODULES)}); "
                  "once per change of their sources, about a minute ...", flush=True)
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                where = build()
            except BaseException as exc:  # a compile error, or mypyc's SystemExit on type errors
                if isinstance(exc, KeyboardInterrupt):
                    raise
                failed = (COMPILE, f"mypyc failed on these sources ({type(exc).__name__}: {exc})")
            else:
                print(f"simulator compiled into {where} in {time.perf_counter() - t0:.0f} s "
                      f"(this process: {time.process_time() - c0:.0f} s CPU; the C compiler's on top)")
                return 0
        else:
            failed = (TOOLCHAIN, reason)
        root().mkdir(parents=True, exist_ok=True)
        (root() / f"{tag}.failed").write_text(f"{failed[0]}\n{failed[1]}\n")
    _loud([f"The simulator's compiled build is NOT available: {failed[1]}.",
           "omniplane.sim runs as plain Python: identical results, about 2x slower.",
           "Fix the cause, then `make sim-compiled` retries (OMNIPLANE_PURE_PYTHON=1 silences this)."])
    return 1 if strict else 0


if __name__ == "__main__":
    sys.exit(main())
