"""M/M/1 throughput of omniplane's simulator against SimPy on the same queue, in one run.

Both simulate the same arrival and service times (rho = 0.8). omniplane's run goes through
the ordinary Simulation path (request objects, a vocoder engine with batch size 1, an executor,
metrics); SimPy's is the textbook Resource-based M/M/1. We report customers per second
(the comparable unit: the two count events differently) and each one's own events per second.

    .venv/bin/python bench/bench_sim_queue.py [customers]
"""

from __future__ import annotations

import sys
import time

import numpy as np
import simpy

from omniplane.sim.queueing import simulate_waits


def simpy_mm1(arrivals: np.ndarray, services: np.ndarray) -> tuple[float, float, int]:
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
    start = time.perf_counter()
    events = 0
    while True:
        try:
            env.step()
            events += 1
        except simpy.core.EmptySchedule:
            break
    wall = time.perf_counter() - start
    skip = len(waits) // 10
    return float(np.mean(waits[skip:])), wall, events


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    seed = 7
    wait, ev, wall = simulate_waits("mm1", 0.8, n, seed)
    rng = np.random.default_rng(seed)  # the same sequences simulate_waits draws
    from omniplane.spec.workload import Poisson
    from omniplane.workload import arrival_times

    arr = arrival_times(Poisson(process="poisson", rate=0.8), rng, n=n)
    svc = rng.exponential(1.0, n)
    s_wait, s_wall, s_ev = simpy_mm1(arr, svc)
    print(f"M/M/1 rho=0.8, {n} customers (closed form Wq = 4.0)")
    for name, w, t, e in (("omniplane", wait, wall, ev), ("SimPy", s_wait, s_wall, s_ev)):
        print(f"  {name:9s}: Wq={w:.4f}  {n / t:10.0f} customers/s  {e / t:10.0f} events/s  "
              f"({e} events, {t:.2f} s)")
    print(f"  ratio (customers/s, omniplane / SimPy): {(n / wall) / (n / s_wall):.2f}x")


if __name__ == "__main__":
    main()
