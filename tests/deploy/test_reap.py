"""Ending what a shutdown left behind: only this process's descendants, only the ones still
running after the grace period, each only while it is the same process (Linux /proc)."""

from __future__ import annotations

import signal
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


# A process with a SIGTERM handler and a child. Stuck: the handler hangs (as one waiting on a
# main thread blocked inside Ray does) and the block never ends. Otherwise the block ends soon after
# the signal and the process runs on past the deadline.
_STUCK = """
import signal, subprocess, sys, time
from omniplane.deploy.reap import deadline_on_signal, descendants
before, got = descendants(), []
signal.signal(signal.SIGTERM, lambda s, f: got.append(s) or time.sleep(60 if STUCK else 0))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
if FILL:  # stderr a full pipe nobody reads (as a parent that reads it only at the end)
    import os
    os.set_blocking(2, False)
    try:
        while True:
            os.write(2, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(2, True)
with deadline_on_signal(before, 1.0, status=STATUS):
    print(child.pid, flush=True)
    while not got:
        time.sleep(0.01)
time.sleep(1.5)
print("after", child.poll(), flush=True)
child.kill()
"""


def _stuck(stuck: bool, status: str = "None", fill: bool = False) -> tuple[subprocess.Popen[str], int]:
    code = _STUCK.replace("STUCK", str(stuck)).replace("STATUS", status).replace("FILL", str(fill))
    proc = subprocess.Popen([sys.executable, "-c", code], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")})
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    proc.terminate()
    return proc, child


def test_a_signal_the_process_does_not_act_on_in_time_kills_its_descendants_and_ends_it() -> None:
    proc, child = _stuck(stuck=True)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM and "after" not in out
    assert "killed 1 processes" in err, err
    assert not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"


def test_a_block_that_ends_after_the_signal_is_left_alone() -> None:
    proc, _ = _stuck(stuck=False)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.split()[-2:] == ["after", "None"], (out, err)


def test_the_deadline_ends_the_process_with_the_callers_status_though_stderr_is_a_full_pipe() -> None:
    """deploy's rule: a stop while serving ends with 0; the one-line notice must not hang the exit
    when the parent reads stderr only after the process ends (a blocking write would wait for ever)."""
    proc, child = _stuck(stuck=True, status="lambda sig: 0", fill=True)
    try:
        proc.wait(timeout=30)  # stderr not read until the process has ended
    finally:
        if proc.poll() is None:
            proc.kill()
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "after" not in out
    assert not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"
