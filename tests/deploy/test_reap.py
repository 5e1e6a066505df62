"""Ending what a shutdown left behind: only this process's descendants, only the ones still
running after the grace period, each only while it is the same process (Linux /proc)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from omniplane.deploy.reap import descendants, end_leftovers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_leftover_descendant_is_ended_and_one_that_exits_is_left_alone() -> None:
    before = descendants()  # not this test's: never ended here
    stays = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # a grandchild too: the child starts it and waits
    nested = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys; subprocess.run([sys.executable, '-c', "
                               "'import time; time.sleep(60)'])"])
    leaves = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    try:
        deadline = time.monotonic() + 30
        while len(mine := descendants() - before) < 4 and time.monotonic() < deadline:  # the grandchild
            time.sleep(0.05)
        pids = {p for p, _ in mine}
        assert {stays.pid, nested.pid, leaves.pid} <= pids and len(pids) >= 4
        killed = end_leftovers(mine, grace_s=5.0)
        assert stays.pid in killed and nested.pid in killed and leaves.pid not in killed
        assert stays.wait(timeout=10) == -9 and leaves.wait(timeout=10) == 0
        assert not descendants() - before - {(p, s) for p, s in mine if p not in killed}
    finally:
        for p in (stays, nested, leaves):
            if p.poll() is None:
                p.kill()
            p.wait()


def test_the_stop_watchdog_kills_what_a_live_process_started_and_leaves_it() -> None:
    """deploy's stop while serving: what it started and still runs after the wait is killed (a Ray
    shutdown blocked for minutes), the process itself is left to exit on its own."""
    from omniplane.deploy.reap import stop_watchdog

    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                               "print(c.pid, flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        stop_watchdog(parent.pid, 0.5)
        end = time.monotonic() + 30
        while time.monotonic() < end and Path(f"/proc/{child}/stat").read_text().split()[2] != "Z":
            time.sleep(0.1)
        assert Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"  # killed, not yet reaped
        assert parent.poll() is None
    finally:
        parent.kill()
        parent.wait()
