"""Workload figures for docs/results/benchmarks.md.

1. Rate and CV of 100,000 arrivals from each generator (seed 0) against what was asked.
2. generate() speed for 100,000 requests, against the per-request path (spec.work.sample_work,
   one resolve() call per request) measured in the same run.
3. Trace load times and the ServeGen aggregate published rate.

Run: .venv/bin/python bench/bench_workload.py
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable

import numpy as np

from omniplane.spec import find_catalog_workload, load_workload
from omniplane.spec.work import sample_work
from omniplane.spec.workload import GammaArrivals, Poisson, WeibullArrivals
from omniplane.workload import arrival_times, generate, load_servegen, load_trace, resolve_trace

N = 100_000


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def arrivals() -> None:
    print(f"== arrivals: {N:,} per process, seed 0")
    print(f"{'process':28} {'rate asked':>10} {'rate got':>10} {'err %':>7} {'cv asked':>9} "
          f"{'cv got':>8} {'err %':>7}")
    specs = [
        (Poisson(process="poisson", rate=10.0), 1.0),
        (GammaArrivals(process="gamma", rate=10.0, cv=0.5), 0.5),
        (GammaArrivals(process="gamma", rate=10.0, cv=2.0), 2.0),
        (WeibullArrivals(process="weibull", rate=10.0, cv=1.5), 1.5),
    ]
    for spec, cv in specs:
        t = arrival_times(spec, np.random.default_rng(0), n=N)
        gaps = np.diff(t)
        rate, got_cv = 1 / gaps.mean(), gaps.std(ddof=1) / gaps.mean()
        label = f"{spec.process} cv={cv}"
        print(f"{label:28} {spec.rate:10.3f} {rate:10.4f} {100 * (rate / spec.rate - 1):+7.2f} "
              f"{cv:9.3f} {got_cv:8.4f} {100 * (got_cv / cv - 1):+7.2f}")


def speed() -> None:
    print(f"\n== generate() for {N:,} requests (best of 3)")
    for name in ("qwen3-omni-servegen", "qwen2.5-omni-horizon", "qwen3-omni-servegen-trace"):
        path = find_catalog_workload(name)
        assert path is not None
        wl = load_workload(path)
        secs = best_of(lambda wl=wl: generate(wl, n=N))
        print(f"{name:28} {secs:6.2f} s  ({secs / N * 1e6:5.1f} us/request)")
    path = find_catalog_workload("qwen3-omni-servegen")
    assert path is not None
    wl = load_workload(path)
    model = wl.model
    per_type = N // len(model.type_names)

    def naive() -> None:
        for t in model.type_names:
            sample_work(model, t, np.random.default_rng(0), per_type)

    naive_s = best_of(naive, 1) * N / (per_type * len(model.type_names))
    fast_s = best_of(lambda: generate(wl, n=N))
    print(f"per-request resolve (spec.work.sample_work), sizes only: {naive_s:6.2f} s "
          f"-> generate() is {naive_s / fast_s:.1f}x faster, arrivals and Request objects included")


def traces() -> None:
    print("\n== traces")
    for name in ("azure-conv", "azure-code", "mooncake-conversation"):
        secs = best_of(lambda name=name: load_trace(name), 1)
        tr = load_trace(name)
        print(f"{name:24} {len(tr):7,} requests, {tr.arrival[-1]:7.1f} s, load {secs:5.2f} s")
    path, _ = resolve_trace("servegen-mm-image")
    t0 = time.perf_counter()
    data = load_servegen(path)
    load_s = time.perf_counter() - t0
    _, total = data.total_rate()
    t0 = time.perf_counter()
    day = data.sample(np.random.default_rng(0))
    sample_s = time.perf_counter() - t0
    print(f"servegen-mm-image        {len(data.clients)} clients, load {load_s:.2f} s; published aggregate "
          f"rate per 600 s window: mean {total.mean():.3f}, min {total.min():.3f}, max {total.max():.3f} "
          f"req/s; expected requests/day {total.sum() * 600:,.0f}; one realisation (seed 0) "
          f"{len(day):,} in {sample_s:.2f} s")


if __name__ == "__main__":
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    arrivals()
    speed()
    traces()
