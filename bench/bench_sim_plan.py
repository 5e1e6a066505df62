"""Wall time to simulate Qwen3-Omni requests on a 16-GPU plan (the issue's goal: 100,000
requests under 10 s on a 2-core machine).

    .venv/bin/python bench/bench_sim_plan.py [requests] [rate]

The plan is Cornfigurator's 16 x A100-80GB plan for Qwen3-Omni (catalog
``qwen3-omni-16xa100-cornfigurator``); the workload is the catalog ``qwen3-omni-servegen`` mix
at ``rate`` requests/s (default 12, where the plan is stable). Request generation is timed
separately from the simulation. The process's CPU time is printed beside the wall time: on a
shared machine the wall time grows with other load, the CPU time much less. OMNIPLANE_PURE_PYTHON=1
runs the simulator as plain Python instead of its compiled modules (same results).
"""

from __future__ import annotations

import sys
import time

from omniplane.perf import CostModel
from omniplane.sim import native, simulate
from omniplane.spec import load_plan, load_workload
from omniplane.spec.catalog import catalog_dir
from omniplane.workload import generate


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rate = float(sys.argv[2]) if len(sys.argv) > 2 else 12.0
    plan = load_plan(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
    wl = load_workload(catalog_dir() / "workloads" / "qwen3-omni-servegen.yaml")
    t0 = time.perf_counter()
    requests = generate(wl, n=n, rate=rate, seed=1)
    t1, c1 = time.perf_counter(), time.process_time()
    result = simulate(plan, requests, CostModel(plan.model))
    t2, c2 = time.perf_counter(), time.process_time()
    steps = sum(e["steps"] for e in result.executors.values())
    path = "compiled" if native.active() else "plain Python"
    print(f"{n} Qwen3-Omni requests at {rate} req/s on 16 x A100 (3 nodes, 16 executors); "
          f"omniplane.sim runs {path}")
    print(f"  generate : {t1 - t0:6.2f} s")
    print(f"  simulate : {t2 - t1:6.2f} s  ({result.events} events, {steps} executor iterations, "
          f"{result.horizon_s:.0f} simulated seconds, {n / (t2 - t1):.0f} requests/s)")
    print(f"             {c2 - c1:6.2f} s of this process's CPU time (wall time grows with other load)")
    print(f"  completed {result.completed}, failed {result.failed}, in flight {result.in_flight}")


if __name__ == "__main__":
    main()
