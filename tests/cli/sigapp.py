"""A two-command app on the CLI's shared pieces, for tests/cli/test_signals.py: ``pool`` runs
sleeps in worker processes (as ``experiment horizon`` does), ``write`` holds a staged output
(as every writing command does) until it is stopped."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from omniplane.cli.errors import new_app
from omniplane.cli.files import Outputs
from omniplane.parallel import map_processes

app = new_app("signal test app", root=True, name="omniplane")


@app.command("pool")
def pool() -> None:
    sys.stderr.write("started\n")
    sys.stderr.flush()
    for _ in map_processes(time.sleep, [60.0] * 4, jobs=2):
        pass


@app.command("write")
def write(out: Path) -> None:
    with Outputs() as files:
        files.text(out, "x\n")
        sys.stderr.write("staged\n")
        sys.stderr.flush()
        time.sleep(60)
        files.commit()


if __name__ == "__main__":
    app()
