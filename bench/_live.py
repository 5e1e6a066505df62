"""What every bench script that starts a real vLLM shares, done when it is imported (so the
script's own imports that follow stay at the top of the file): without vLLM the script is skipped
(exit status 0, a line saying how to run it); with vLLM, this checkout's ``src/`` comes first on
the module path. ``bench/`` is on the path because the script runs from it.

    import _live  # before any omniplane import
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_DATA = ROOT / "src" / "omniplane" / "fidelity" / "data"  # the fixture model's workloads

try:
    import vllm  # noqa: F401
except ImportError:
    name = Path(sys.argv[0]).stem
    print(f"{name}: skipped: needs vLLM (run it with .venv-vllm/bin/python; make vllm-extra)")
    sys.exit(0)

sys.path.insert(0, str(ROOT / "src"))


def fixture_llm() -> tuple[Any, Any, str]:
    """The fixture model's fidelity workload, its model and the model's LLM component."""
    from omniplane.spec import load_workload

    wl = load_workload(FIXTURE_DATA / "tiny-qwen2-fidelity.yaml")
    return wl, wl.model, next(c.name for c in wl.model.components if c.is_llm)


def fixture_server(served_name: str, log: Path) -> Any:
    """A ServerSpec for the fixture model, run by this Python, logging to ``log``."""
    from omniplane.fidelity.server import ServerSpec
    from omniplane.fixture import ensure_model_dir

    return ServerSpec(str(ensure_model_dir()), served_name=served_name, python=sys.executable, log=log)


def alternating(pair: tuple[str, str], rounds: int) -> list[str]:
    """A/B order over ``rounds`` rounds, the pair reversed every other round (AB BA AB ...)."""
    return [m for r in range(rounds) for m in (pair if r % 2 == 0 else pair[::-1])]
