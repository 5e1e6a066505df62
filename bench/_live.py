"""What every bench script that starts a real vLLM shares, done when it is imported (so the
script's own imports that follow stay at the top of the file): without vLLM the script is skipped
(exit status 0, a line saying how to run it); with vLLM, this checkout's ``src/`` comes first on
the module path. ``bench/`` is on the path because the script runs from it.

    import _live  # before any omniplane import
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_DATA = ROOT / "src" / "omniplane" / "fidelity" / "data"  # the fixture model's workloads

try:
    import vllm  # noqa: F401
except ImportError:
    name = Path(sys.argv[0]).stem
    print(f"{name}: skipped: needs vLLM (run it with .venv-vllm/bin/python; make vllm-extra)")
    sys.exit(0)

sys.path.insert(0, str(ROOT / "src"))
