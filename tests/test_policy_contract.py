"""The policy contract (``omniplane.policy``) is a leaf: a vLLM engine process that speaks it
loads no simulator, cost model or spec module (issue 19)."""

from __future__ import annotations

import subprocess
import sys


def _imported(module: str) -> list[str]:
    """Every module a fresh interpreter imports for ``import module`` (``-X importtime``)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                         capture_output=True, text=True, check=True)
    names = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":  # the header line
                names.append(name)
    return names


def test_the_policy_contract_imports_nothing_from_omniplane_or_third_parties() -> None:
    names = _imported("omniplane.policy")
    assert "omniplane.policy" in names  # the measurement sees the module itself
    ours = sorted(n for n in names if n.split(".")[0] == "omniplane")
    assert ours == ["omniplane", "omniplane.policy"], ours
    third = sorted(n for n in names if n.split(".")[0] in {"numpy", "pydantic", "yaml", "scipy"})
    assert third == [], third


def test_the_factory_and_the_ladder_load_no_simulator_perf_or_spec_module() -> None:
    for module in ("omniplane.sched.factory", "omniplane.sched.ladder"):
        names = _imported(module)
        assert module in names
        heavy = sorted(n for n in names if n.split(".")[:2] in (["omniplane", "sim"], ["omniplane", "perf"],
                                                              ["omniplane", "spec"], ["omniplane", "plan"]))
        assert heavy == [], f"{module} loads {heavy}"
