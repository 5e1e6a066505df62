"""Keeping the load generator off the engine's cores: what is read as the engine's binding,
what is moved, and what is restored."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from omniplane.loadgen.affinity import (
    Pinning,
    cpu_split,
    engine_core_threads,
    engine_cpus,
    group_pids,
    host_cpus,
    isolate_engine,
    renice,
    separate,
    threads,
)

# a stand-in for vLLM's engine: its main thread binds itself to one core (as the CPU worker's
# OpenMP threads do), a helper thread stays free
CHILD = """
import os, sys, threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
os.sched_setaffinity(0, {int(sys.argv[1])})
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture
def engine_like() -> object:
    host = sorted(host_cpus())
    if len(host) < 2:
        pytest.skip("needs two cores")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(host[0])], stdout=subprocess.PIPE,
                            start_new_session=True, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc, host
    proc.kill()
    proc.wait()


def test_separate_moves_the_free_threads_and_this_process_off_the_bound_core(engine_like: object) -> None:
    proc, host = engine_like  # type: ignore[misc]
    assert group_pids(proc.pid) == [proc.pid]
    assert engine_cpus(proc.pid) == {host[0]}
    mine = os.sched_getaffinity(0)
    with separate(proc.pid, restore_group=True) as trial:
        assert trial.moved_threads == 1
    # an A/B trial puts the moved thread back on every core
    assert sorted(len(os.sched_getaffinity(t)) for t in threads(proc.pid)) == [1, len(host)]
    with separate(proc.pid) as pin:
        assert pin.pinned and pin.engine_cpus == (host[0],) and pin.client_cpus == tuple(host[1:])
        assert pin.moved_threads == 1  # the helper thread; the bound one is the engine's own
        affinities = sorted(tuple(sorted(os.sched_getaffinity(t))) for t in threads(proc.pid))
        assert affinities == sorted([(host[0],), tuple(host[1:])])
        assert os.sched_getaffinity(0) == set(host[1:])
        assert Pinning.from_json(pin.to_json()) == pin
    assert os.sched_getaffinity(0) == mine  # restored for this process
    assert any(os.sched_getaffinity(t) == set(host[1:]) for t in threads(proc.pid))  # the server's stay


def test_nothing_bound_means_nothing_pinned() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, start_new_session=True, text=True)
    try:  # the child says when it runs (no sleep as synchronisation)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        mine = os.sched_getaffinity(0)
        with separate(proc.pid) as pin:
            assert not pin.pinned and "bound no core" in pin.note
            assert os.sched_getaffinity(0) == mine
        assert "not pinned" in pin.describe()
    finally:
        proc.kill()
        proc.wait()


def test_the_client_layout_leaves_the_client_alone_and_the_engine_together(engine_like: object) -> None:
    proc, host = engine_like  # type: ignore[misc]
    with separate(proc.pid, restore_group=True, layout="client") as pin:
        assert pin.pinned and pin.layout == "client" and pin.worker_pids == (proc.pid,)
        # the free helper thread joins the bound one on the worker's core; this process has the rest
        assert all(os.sched_getaffinity(t) == {host[0]} for t in threads(proc.pid))
        assert os.sched_getaffinity(0) == set(host[1:])
        assert "alone on cores" in pin.describe()
        assert Pinning.from_json(pin.to_json()) == pin
        before = cpu_split(proc.pid, pin.worker_pids)
        t0 = time.process_time()
        while time.process_time() - t0 < 0.05:  # this process (the "client") burns 50 ms
            pass
        after = cpu_split(proc.pid, pin.worker_pids)
    assert after["client"] - before["client"] >= 0.03  # clock ticks: 10 ms resolution
    assert all(after[k] >= before[k] >= 0 for k in after) and "worker_wait" in after
    assert after["worker"] - before["worker"] < 0.03 and after["server"] == before["server"] == 0.0
    with pytest.raises(ValueError, match="layout must be one of"), separate(proc.pid, layout="both"):
        pass


def test_renice_reaches_the_engine_core_threads_and_not_the_api_server() -> None:
    # a group like vLLM's: a leader (the API server) and a child (the engine core), forked before
    # the leader says it is ready
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & echo ready; wait"], stdout=subprocess.PIPE,
                            start_new_session=True, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        core = engine_core_threads(proc.pid, ())
        assert core and proc.pid not in core  # the leader's thread is not the engine core's
        assert engine_core_threads(proc.pid, tuple(group_pids(proc.pid))) == []  # workers are left alone
        leader_nice = os.getpriority(os.PRIO_PROCESS, proc.pid)
        assert renice(core, leader_nice + 7) == len(core)
        assert all(os.getpriority(os.PRIO_PROCESS, t) == leader_nice + 7 for t in core)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == leader_nice
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()



def _vllm_like_group(core: int) -> subprocess.Popen[str]:
    """vLLM's layout: a leader (the API server), a worker bound to one core, an engine core free;
    returns once the worker says it is bound (after the engine core was forked)."""
    worker = CHILD.replace("sys.argv[1]", str(core))
    proc = subprocess.Popen(["sh", "-c", f"sleep 60 & {sys.executable} -c '{worker}' & wait"],
                            stdout=subprocess.PIPE, start_new_session=True, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("extra_nice", [0, 5])
def test_isolate_engine_pins_the_client_and_renices_only_the_engine_core(extra_nice: int) -> None:
    host = sorted(host_cpus())
    if len(host) < 2:
        pytest.skip("needs two cores")
    proc = _vllm_like_group(host[0])
    try:
        leader_nice = os.getpriority(os.PRIO_PROCESS, proc.pid)
        want = leader_nice + extra_nice
        mine = os.sched_getaffinity(0)
        with isolate_engine(proc.pid, "worker", want if extra_nice else 0) as (pin, niced):
            assert pin.pinned and len(pin.worker_pids) == 1
            assert os.sched_getaffinity(0) == set(host[1:])
            core = engine_core_threads(proc.pid, pin.worker_pids)
            assert core and niced == (len(core) if extra_nice else 0)  # 0: the engine core is left alone
        assert os.sched_getaffinity(0) == mine
        assert all(os.getpriority(os.PRIO_PROCESS, t) == want for t in core)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == leader_nice  # the API server is not reniced
        for w in pin.worker_pids:  # nor the worker
            assert all(os.getpriority(os.PRIO_PROCESS, t) == leader_nice for t in threads(w))
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
