"""The simulator's hot modules compiled with mypyc: an optional speed-up with identical results.

Opt-in: ``make sim-compiled`` (:func:`main`) compiles :data:`MODULES`
with mypyc into ``<venv>/omniplane-native/<stamp>/``; ``make run`` and ``make test`` do not (the
compile takes about a minute of CPU), so by default the simulator runs as plain Python. On
import, ``omniplane.sim`` uses a build only when its stamp matches the current sources (every
``.py`` file of the omniplane package, since the compiled modules are typed against the modules
they import, and the Python version and platform) and plain Python otherwise: an edited source
is never shadowed by a stale build. Set ``OMNIPLANE_PURE_PYTHON=1`` to run plain Python
regardless.

The compiled modules run the same operations in the same order on the same IEEE doubles and
Python integers, so a run gives bit-identical results either way (``tests/sim/test_native.py``
compares them). Where no C compiler or Python headers are available the build fails with a
message and everything runs as plain Python.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import os
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import MutableSequence
from contextlib import chdir
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
MODULES = ("eventloop", "job", "walk", "request", "engines", "llm", "executor", "topology", "simulator")
GROUP = "omniplane_sim_native"  # the shared library mypyc builds for the group
PURE_ENV = "OMNIPLANE_PURE_PYTHON"


def stamp() -> str:
    """What a build is valid for: the package's sources, the Python version and the platform."""
    where = f"{sys.version_info[:2]} {sysconfig.get_platform()} {sys.implementation.name}"
    h = hashlib.sha256(where.encode())
    top = PACKAGE.parent
    for src in sorted(top.rglob("*.py")):
        h.update(src.relative_to(top).as_posix().encode())
        h.update(src.read_bytes())
    return h.hexdigest()[:20]


def location(tag: str | None = None) -> Path:
    return Path(sys.prefix) / "omniplane-native" / (tag or stamp())


def activate(package_path: MutableSequence[str]) -> bool:
    """Put a matching build first on ``omniplane.sim``'s module path (called by its __init__)."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return False
    target = location()
    if not (target / "STAMP").is_file() or not (target / "omniplane" / "sim").is_dir():
        return False
    if str(target) not in sys.path:
        sys.path.append(str(target))  # the group's shared library is a top-level module
    package_path.insert(0, str(target / "omniplane" / "sim"))
    return True


def active() -> bool:
    """Whether this process runs the compiled modules."""
    origin = getattr(importlib.import_module("omniplane.sim.eventloop"), "__file__", "") or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def build() -> Path:
    """Compile :data:`MODULES` into :func:`location`; returns it. Raises if mypyc or a C compiler
    is missing (the caller falls back to plain Python)."""
    from mypyc.build import mypycify  # mypy's compiler: the `native` extra
    from setuptools import Distribution  # type: ignore[import-untyped]

    tag = stamp()
    target = location(tag)
    if (target / "STAMP").is_file():
        return target
    root = PACKAGE.parent.parent  # the directory holding the omniplane package
    with tempfile.TemporaryDirectory(prefix="omniplane-native-") as tmp:
        out = Path(tmp) / "lib"
        with chdir(root):
            args = [f"--cache-dir={Path(tmp) / 'cache'}", *(f"omniplane/sim/{m}.py" for m in MODULES)]
            exts = mypycify(args, opt_level="3", group_name=GROUP, target_dir=str(Path(tmp) / "c"))
            dist = Distribution({"name": GROUP, "ext_modules": exts, "script_name": "setup.py"})
            cmd = dist.get_command_obj("build_ext")
            cmd.build_lib, cmd.build_temp, cmd.inplace = str(out), str(Path(tmp) / "obj"), False
            dist.run_command("build_ext")
        staged = target.with_name(tag + ".partial")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(out, staged)
        (staged / "STAMP").write_text(tag + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
    for old in target.parent.iterdir():  # builds of other sources
        if old != target:
            shutil.rmtree(old, ignore_errors=True)
    return target


def main() -> None:
    """``make sim-compiled``: build, or say why not (exit status 1)."""
    try:
        print(f"simulator modules compiled into {build()}")
    except Exception as exc:  # no compiler, no headers, no mypyc
        sys.exit(f"the simulator's compiled modules could not be built ({type(exc).__name__}: {exc}); "
                 "omniplane.sim runs as plain Python (same results, slower)")
