"""Ending what a shutdown left behind: only this process's descendants, only the ones still
running after the grace period, each only while it is the same process (Linux /proc)."""

from __future__ import annotations

import subprocess
import sys
import time

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
