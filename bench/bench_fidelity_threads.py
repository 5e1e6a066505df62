"""Who gets core 1? Per-thread CPU and run-queue wait of the load generator, the API server, the
engine core and the worker while vLLM serves bursts and a closed loop (docs/fidelity.md,
"Session 7").

One vLLM server on the tiny fixture (vLLM's CPU build, .venv-vllm), the client pinned as
``omniplane fidelity`` pins it (``worker`` layout: the worker alone on its core, the API server,
the engine core and this process on the other). Points: one warm-up request, two bursts of 128
and of 4 streams (32 tokens each), a closed loop of 32 workers for ``--window`` s. Around each,
every thread's scheduler counters (``/proc/PID/task/TID/schedstat``: ns on a CPU, ns runnable
but waiting for one); printed per thread with more than 1% of a core either way, as shares of the
point's wall time, with the client's TTFT / TPOT against the engine's own. ``--setsid`` first puts
this process in a session of its own (its own scheduler autogroup). ``--nice-core 0,19`` runs the
points once per value, interleaved on the same engine, with the engine core's threads at that
niceness (:func:`omniplane.loadgen.affinity.renice`). ``uptime`` before and after.
A measurement of the environment, not of omniplane.

    .venv-vllm/bin/python bench/bench_fidelity_threads.py [--window 8] [--setsid] \\
        [--out out/fidelity-threads.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import _live  # noqa: F401  (first: skips without vLLM, puts src/ on the path)

from omniplane.fidelity.fixture import ensure_model_dir
from omniplane.fidelity.server import ServerSpec, VllmServer
from omniplane.loadgen.affinity import (
    engine_core_threads,
    group_pids,
    renice,
    separate,
    thread_cpu_s,
    threads,
)
from omniplane.perf.profiler import ProfileRun, RequestSpec, run_profile


def _comm(pid: int, tid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "task" / str(tid) / "comm").read_text().strip()
    except OSError:
        return "?"


def _snap(pids: list[int]) -> dict[tuple[int, int], tuple[float, float]]:
    return {(pid, t): thread_cpu_s(pid, t) for pid in pids for t in threads(pid)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--setsid", action="store_true")
    ap.add_argument("--nice-core", default="0", help="comma-separated niceness of the engine core per round")
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
                      log=a.out.parent / "fidelity-threads-vllm.log")
    points = [("warm-up", RequestSpec("w", 16, 2, concurrency=(1,), burst=True, rounds=1)),
              ("burst-128", RequestSpec("decode-16-b128", 16, 32, concurrency=(128,), burst=True, rounds=2)),
              ("burst-4", RequestSpec("decode-56-b4", 56, 32, concurrency=(4,), burst=True, rounds=2)),
              ("closed-32", RequestSpec("closed", 64, 24, concurrency=(32,), duration_s=a.window))]
    with VllmServer(spec) as server, separate(server.pgid) as pin:
        doc["pinning"] = pin.to_json()
        pids = [*group_pids(server.pgid), os.getpid()]
        base = ProfileRun(server.url, "tiny-qwen2", "llm", "cpu", 1, (), requests_per_worker=1,
                          api="completions", vocab=2048)
        rounds = [(nice, name, s) for nice in (int(x) for x in a.nice_core.split(",")) for name, s in points]
        for nice, name, s in rounds:
            if name == points[0][0]:
                n = renice(engine_core_threads(server.pgid, pin.worker_pids), nice)
                print(f"engine core: {n} threads at niceness {nice}")
            before, t0 = _snap(pids), time.monotonic()
            [p] = run_profile(replace(base, requests=(s,))).points
            wall, after = time.monotonic() - t0, _snap(pids)
            rows = []
            for (pid, tid), (c1, w1) in after.items():
                c0, w0 = before.get((pid, tid), (0.0, 0.0))
                if (c1 - c0) / wall > 0.01 or (w1 - w0) / wall > 0.01:
                    who = "client" if pid == os.getpid() else "api" if pid == server.pgid else (
                        "worker" if pid in pin.worker_pids else "engine-core")
                    rows.append({"part": who, "tid": tid, "name": _comm(pid, tid),
                                 "cpu": (c1 - c0) / wall, "wait": (w1 - w0) / wall})
            point = {"point": name, "nice_core": nice, "wall_s": wall,
                     "client_ttft_ms": (p.median("ttft") or 0) * 1e3,
                     "client_tpot_ms": (p.median("tpot") or 0) * 1e3,
                     "engine_ms": {k: v * 1e3 for k, v in p.server_s.items()}, "threads": rows}
            doc["points"].append(point)
            print(f"== {name} (engine core niceness {nice}): wall {wall:.1f} s, client TTFT "
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
