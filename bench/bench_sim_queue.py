"""M/M/1 throughput of omniplane's simulator against SimPy on the same queue, in one run.

Both simulate the same arrival and service times (rho = 0.8). omniplane's run goes through
the ordinary Simulation path (request objects, a vocoder engine with batch size 1, an executor,
metrics), compiled or plain Python as ``omniplane.sim`` loads it (OMNIPLANE_PURE_PYTHON=1 for
plain Python); SimPy's is the textbook Resource-based M/M/1. We report customers per second
(the comparable unit: the two count events differently) and each one's own events per second.
Garbage is collected before each timed run. omniplane pauses Python's cyclic GC during a run
(Simulation.run); SimPy is timed as it comes and, for a like-for-like figure, with GC paused too.

    .venv/bin/python bench/bench_sim_queue.py [customers] [rounds]
"""

from __future__ import annotations

import gc
import sys
import time

import numpy as np
import simpy

from omniplane.sim import native
from omniplane.sim.queueing import simulate_waits


def simpy_mm1(arrivals: np.ndarray, services: np.ndarray, pause_gc: bool = False) -> tuple[float, float, int]:
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    waits: list[float] = []

    def customer(i: int):  # type: ignore[no-untyped-def]
        t0 = env.now
        with server.request() as req:
            yield req
            waits.append(env.now - t0)
            yield env.timeout(services[i])

    def source():  # type: ignore[no-untyped-def]
        prev = 0.0
        for i, t in enumerate(arrivals):
            yield env.timeout(t - prev)
            prev = t
            env.process(customer(i))

    env.process(source())
    gc.collect()
    if pause_gc:
        gc.disable()
    start = time.perf_counter()
    events = 0
    while True:
        try:
            env.step()
            events += 1
        except simpy.core.EmptySchedule:
            break
    wall = time.perf_counter() - start
    gc.enable()
    skip = len(waits) // 10
    return float(np.mean(waits[skip:])), wall, events


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    seed = 7
    rng = np.random.default_rng(seed)  # the same sequences simulate_waits draws
    from omniplane.spec.workload import Poisson
    from omniplane.workload import arrival_times

    arr = arrival_times(Poisson(process="poisson", rate=0.8), rng, n=n)
    svc = rng.exponential(1.0, n)
    runs: dict[str, list[tuple[float, float, int]]] = {"omniplane": [], "SimPy": [], "SimPy, GC paused": []}
    for _ in range(rounds):  # alternated, so that load on a shared machine hits all alike
        gc.collect()
        runs["omniplane"].append(simulate_waits("mm1", 0.8, n, seed))
        w, t, e = simpy_mm1(arr, svc)
        runs["SimPy"].append((w, e, t))
        w, t, e = simpy_mm1(arr, svc, pause_gc=True)
        runs["SimPy, GC paused"].append((w, e, t))
    path = "compiled" if native.active() else "plain Python"
    print(f"M/M/1 rho=0.8, {n} customers (closed form Wq = 4.0); omniplane.sim runs {path}; "
          f"median of {rounds} alternated rounds")
    wall = {}
    for name, rs in runs.items():
        w, e, _ = rs[0]
        wall[name] = t = float(np.median([r[2] for r in rs]))
        print(f"  {name:16s}: Wq={w:.4f}  {n / t:10.0f} customers/s  {e / t:10.0f} events/s  "
              f"({e} events, {t:.2f} s)")
    print(f"  ratio (customers/s, omniplane / SimPy): {wall['SimPy'] / wall['omniplane']:.2f}x "
          f"({wall['SimPy, GC paused'] / wall['omniplane']:.2f}x against SimPy with GC paused)")


if __name__ == "__main__":
    main()
