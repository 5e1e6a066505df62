"""How fast the cost model answers: calls per second of its hot paths (for the planner and the
simulator, which call them millions of times). Prints figures; never part of make test.

    .venv/bin/python bench/bench_costmodel.py
"""

from __future__ import annotations

import platform
import random
import time
from collections.abc import Callable

from omniplane.perf import CostModel, ExecutorConfig, ProfileRow, ProfileSet
from omniplane.spec import catalog_gpus_path, find_catalog_model, load_gpus, load_model

N = 200_000


def rate(fn: Callable[[int], float], n: int = N) -> float:
    fn(0)  # warm the per-config caches
    t = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - t)


def main() -> None:
    gpus = load_gpus(catalog_gpus_path())
    path = find_catalog_model("qwen3-omni")
    assert path is not None
    spec = load_model(path)
    cost = CostModel(spec)
    cfgs = [ExecutorConfig(gpus.get(g), tp) for g in ("H100-SXM", "A100-80GB", "L40S") for tp in (1, 2, 4)]
    rnd = random.Random(0)
    args = [(cfgs[rnd.randrange(len(cfgs))], rnd.randint(1, 256), rnd.randint(0, 2048)) for _ in range(1024)]

    def iteration(i: int) -> float:
        cfg, b, p = args[i & 1023]
        return cost.llm_iteration_time("thinker", cfg, prefill_tokens=p, decode_batch=b,
                                       decode_context=b * 900)

    def decode(i: int) -> float:
        cfg, b, _ = args[i & 1023]
        return cost.decode_step_time("talker", cfg, b, b * 1200)

    def work(i: int) -> float:
        cfg, b, p = args[i & 1023]
        return cost.llm_iteration_work("thinker", cfg, prefill_tokens=p, decode_batch=b,
                                       decode_context=b * 900).bytes

    def vocoder(i: int) -> float:
        cfg, b, _ = args[i & 1023]
        return cost.vocoder_time("code2wav", cfg, b % 64 + 1, 0.08)

    h100 = ExecutorConfig(gpus.get("H100-SXM"), 1)
    rows = [ProfileRow("thinker", "H100-SXM", 1, "decode", b, s, 5.0 + b * 0.05 + s * 1e-3)
            for b in (1, 8, 32, 128, 256) for s in (128, 1024, 4096)]
    profiled = CostModel(spec, profiles=ProfileSet(rows))

    def table(i: int) -> float:
        b = args[i & 1023][1]
        return profiled.decode_step_time("thinker", h100, b, b * 900)

    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    for name, fn in (("llm_iteration_time (roofline, mixed)", iteration),
                     ("decode_step_time (roofline)", decode),
                     ("llm_iteration_work (roofline)", work),
                     ("vocoder_time (roofline)", vocoder),
                     ("decode_step_time (profile table)", table)):
        print(f"{name:40s} {rate(fn) / 1e6:6.2f} M calls/s")

    from omniplane.perf.solo import solo_table

    t = time.perf_counter()
    solo_table(spec, cost, ExecutorConfig(gpus.get("H100-SXM"), 2), n=200)
    print(f"{'solo_table qwen3-omni (8 types x 200)':40s} {time.perf_counter() - t:6.2f} s")


if __name__ == "__main__":
    main()
