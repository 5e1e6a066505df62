"""Who gets core 1? Per-thread CPU and run-queue wait of the load generator, the API server, the
engine core and the worker while vLLM serves bursts and a closed loop
(docs/decisions/0107-engine-core-renice.md; docs/results/fidelity.md, "The measurements behind the
loop's defaults").

One vLLM server on the tiny fixture (vLLM's CPU build, .venv-vllm), the client pinned as
``omniplane fidelity`` pins it (``worker`` layout: the worker alone on its core, the API server,
the engine core and this process on the other). Points: one warm-up request, two bursts each of
128, 4, 64 and 16 streams (32 tokens each; ``--points`` picks some), a closed loop of 32
workers for ``--window`` s. Around each,
every thread's scheduler counters (``/proc/PID/task/TID/schedstat``: ns on a CPU, ns runnable
but waiting for one); printed per thread with more than 1% of a core either way, as shares of the
point's wall time, with the client's TTFT / TPOT against the engine's own. ``--setsid`` first puts
this process in a session of its own (its own scheduler autogroup). ``--nice-core 0,19`` runs the
points once per value, interleaved on the same engine, with the engine core's threads at that
niceness (:func:`omniplane.loadgen.affinity.renice`). ``--coload 0,0.3,0.6`` runs the
points once per value with a stand-in for front-end load: a process at niceness 0, pinned to the
client's core, busy that share of every 5 ms (busy-then-sleep), so the engine core's iterations
can be timed (the engine's own inter-token latency) against a known load on its core.
``uptime`` before and after. A measurement of the environment, not of omniplane.

    .venv-vllm/bin/python bench/bench_fidelity_threads.py [--window 8] [--setsid] \\
        [--out out/fidelity-threads.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import _live  # noqa: F401  (first: skips without vLLM, puts src/ on the path)

from omniplane.fidelity.server import ServerSpec, VllmServer
from omniplane.fixture import ensure_model_dir
from omniplane.loadgen.affinity import (
    engine_core_threads,
    group_pids,
    renice,
    separate,
    thread_cpu_s,
    threads,
)
from omniplane.perf.profiler import ProfileRun, RequestSpec, run_profile
from omniplane.vllm.shmwait import ENV as SHM_ENV


def _comm(pid: int, tid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "task" / str(tid) / "comm").read_text().strip()
    except OSError:
        return "?"


def _autogroup(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "autogroup").read_text().strip()
    except OSError:
        return "?"


def _snap(pids: list[int]) -> dict[tuple[int, int], tuple[float, float]]:
    return {(pid, t): thread_cpu_s(pid, t) for pid in pids for t in threads(pid)}


HOG = """
import sys, time
duty, period, end = float(sys.argv[1]), 0.005, time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    t = time.monotonic()
    while time.monotonic() - t < duty * period:
        pass
    time.sleep((1 - duty) * period)
"""


def _hog(duty: float, cpus: tuple[int, ...], limit_s: float) -> subprocess.Popen[bytes] | None:
    """A duty-cycle CPU load on ``cpus`` at niceness 0 for at most ``limit_s`` (None at duty 0)."""
    if duty <= 0:
        return None
    proc = subprocess.Popen([sys.executable, "-c", HOG, str(duty), str(limit_s)])
    os.sched_setaffinity(proc.pid, cpus)
    return proc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--setsid", action="store_true")
    ap.add_argument("--nice-core", default="0", help="comma-separated niceness of the engine core per round")
    ap.add_argument("--same-autogroup", action="store_true",
                    help="start vLLM in this session (ServerSpec.new_session=False): one scheduler autogroup")
    ap.add_argument("--coload", default="0", help="comma-separated duty of a core-1 CPU load per round")
    ap.add_argument("--points", default="", help="comma-separated subset of the points (default: all)")
    ap.add_argument("--shm-poll", type=float, default=None,
                    help="seconds vLLM's busy shared-memory queue readers sleep between polls "
                         "(omniplane.vllm.shmwait; default: vLLM's sched_yield loop)")
    ap.add_argument("--out", type=Path, default=Path("out/fidelity-threads.json"))
    a = ap.parse_args()
    doc: dict[str, Any] = {"load_before": os.getloadavg(), "points": []}
    if a.setsid:
        try:
            os.setsid()
            doc["autogroup"] = Path("/proc/self/autogroup").read_text().strip()
        except OSError as exc:
            doc["autogroup"] = f"setsid failed: {exc}"
    spec = ServerSpec(str(ensure_model_dir()), served_name="tiny-qwen2", python=sys.executable,
                      log=a.out.parent / "fidelity-threads-vllm.log", new_session=not a.same_autogroup,
                      env={} if a.shm_poll is None else {SHM_ENV: str(a.shm_poll)})
    doc["shm_poll_s"] = a.shm_poll
    points = [("warm-up", RequestSpec("w", 16, 2, concurrency=(1,), burst=True, rounds=1)),
              ("burst-128", RequestSpec("decode-16-b128", 16, 32, concurrency=(128,), burst=True, rounds=2)),
              ("burst-4", RequestSpec("decode-56-b4", 56, 32, concurrency=(4,), burst=True, rounds=2)),
              ("burst-64", RequestSpec("decode-16-b64", 16, 32, concurrency=(64,), burst=True, rounds=2)),
              ("burst-16", RequestSpec("decode-56-b16", 56, 32, concurrency=(16,), burst=True, rounds=2)),
              ("closed-32", RequestSpec("closed", 64, 24, concurrency=(32,), duration_s=a.window))]
    if a.points:
        keep = {"warm-up", *a.points.split(",")}
        points = [pt for pt in points if pt[0] in keep]
    with VllmServer(spec) as server, separate(server.pgid) as pin:
        doc["pinning"] = pin.to_json()
        doc["autogroups"] = {"server": _autogroup(server.pgid), "client": _autogroup(os.getpid())}
        print(f"autogroups: {doc['autogroups']}")
        pids = [*group_pids(server.pgid), os.getpid()]
        base = ProfileRun(server.url, "tiny-qwen2", "llm", "cpu", 1, (), requests_per_worker=1,
                          api="completions", vocab=2048)
        rounds = [(nice, duty, name, s) for nice in (int(x) for x in a.nice_core.split(","))
                  for duty in (float(x) for x in a.coload.split(",")) for name, s in points]
        for nice, duty, name, s in rounds:
            if name == points[0][0]:
                n = renice(engine_core_threads(server.pgid, pin.worker_pids), nice)
                print(f"engine core: {n} threads at niceness {nice}; core-{pin.client_cpus} load {duty}")
            hog = _hog(duty, pin.client_cpus, 120.0) if name != points[0][0] else None
            try:
                before, t0 = _snap(pids), time.monotonic()
                [p] = run_profile(replace(base, requests=(s,))).points
                wall, after = time.monotonic() - t0, _snap(pids)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
            rows = []
            for (pid, tid), (c1, w1) in after.items():
                c0, w0 = before.get((pid, tid), (0.0, 0.0))
                if (c1 - c0) / wall > 0.01 or (w1 - w0) / wall > 0.01:
                    who = "client" if pid == os.getpid() else "api" if pid == server.pgid else (
                        "worker" if pid in pin.worker_pids else "engine-core")
                    rows.append({"part": who, "tid": tid, "name": _comm(pid, tid),
                                 "cpu": (c1 - c0) / wall, "wait": (w1 - w0) / wall})
            point: dict[str, Any] = {"point": name, "nice_core": nice, "coload": duty, "wall_s": wall,
                     "client_ttft_ms": (p.median("ttft") or 0) * 1e3,
                     "client_tpot_ms": (p.median("tpot") or 0) * 1e3,
                     "engine_ms": {k: v * 1e3 for k, v in p.server_s.items()}, "threads": rows}
            doc["points"].append(point)
            print(f"== {name} (engine core niceness {nice}, core load {duty}): wall {wall:.1f} s, "
                  f"client TTFT "
                  f"{point['client_ttft_ms']:.0f} ms vs engine "
                  f"{point['engine_ms'].get('ttft', 0):.0f} ms, client TPOT {point['client_tpot_ms']:.1f} ms "
                  f"vs engine ITL {point['engine_ms'].get('itl', 0):.1f} ms")
            for r in rows:
                print(f"   {r['part']:11} {r['name']:18} cpu {r['cpu']:.3f} wait {r['wait']:.3f}")
    doc["load_after"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    print(f"uptime load {doc['load_before'][0]:.2f} -> {doc['load_after'][0]:.2f}; wrote {a.out}")


if __name__ == "__main__":
    main()
