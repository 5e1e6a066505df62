"""SIGINT and SIGTERM end a command within 5 s, its worker processes included, with 130 / 143
and one line naming what was stopped, leaving no staging files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omniplane.cli.files import STAGING_PREFIX
from omniplane.parallel import map_processes

SRC = Path(__file__).resolve().parents[2] / "src"
LIMIT_S = 5.0


def children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        out |= {int(c) for c in (task / "children").read_text().split()}
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def gone_within(pids: set[int], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_leaving_the_loop_ends_the_workers() -> None:
    """What an interruption does to a pool (in this process): running tasks are not waited for."""
    results = map_processes(time.sleep, [0.0, 60.0, 60.0, 60.0], jobs=3)
    assert next(results) == (0.0, None)
    workers = children(os.getpid())
    assert workers
    t0 = time.monotonic()
    results.close()  # what a KeyboardInterrupt in the loop's body does
    assert time.monotonic() - t0 < LIMIT_S and gone_within(workers, LIMIT_S)


REPO = SRC.parent


def start(command: str, cwd: Path) -> subprocess.Popen[str]:
    """``tests/cli/sigapp.py``'s command (the CLI's shared error path, pools and outputs)."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{REPO}"}
    # a test runner started as a background job ignores SIGINT, and so would its children
    # (omniplane keeps an ignored SIGINT ignored, as Python does): give the command a terminal's
    return subprocess.Popen([sys.executable, "-m", "tests.cli.sigapp", *command.split()], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for(proc: subprocess.Popen[str], ready: object, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.02)
    proc.kill()
    pytest.fail("the command never got going")


def stop(proc: subprocess.Popen[str], sig: int) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{signal.Signals(sig).name} did not end the command within {LIMIT_S} s")
    return proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_command_and_its_workers_stop(tmp_path: Path, sig: int) -> None:
    proc = start("pool", tmp_path)
    wait_for(proc, lambda: len(children(proc.pid)) >= 2)  # the pool's workers run
    workers = children(proc.pid)
    code, err = stop(proc, sig)
    assert code == 128 + sig, err
    assert err.strip().splitlines()[-1] == (f"error: interrupted by {signal.Signals(sig).name}: "
                                            "'omniplane pool' stopped; no output file was written")
    assert gone_within(workers, LIMIT_S), "worker processes outlived the command"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_command_leaves_no_staging(tmp_path: Path, sig: int) -> None:
    proc = start("write out/r.txt", tmp_path)
    wait_for(proc, lambda: any(tmp_path.glob(f"{STAGING_PREFIX}*")))
    code, err = stop(proc, sig)
    assert code == 128 + sig, err
    assert list(tmp_path.iterdir()) == []  # no staging folder, no output


def test_the_sweep_terminates_its_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """``experiment horizon``'s sweep runs its points through :func:`map_processes`."""
    from omniplane.repro.horizon import experiment as ex

    used: list[int] = []

    def fake(fn: object, tasks: list[object], jobs: int) -> object:
        used.append(jobs)
        return (x for x in ())  # a generator, as map_processes

    monkeypatch.setattr("omniplane.parallel.map_processes", fake)
    spec = ex.SweepSpec("qwen3-omni", "h100", "rate", (0.2, 0.3), ("vanilla",), 10.0, 10, 0, 1, None,
                        "chunk", None)
    with pytest.raises(KeyError):  # the fake ran nothing
        ex.run_sweep(spec, jobs=2)
    assert used == [2]
