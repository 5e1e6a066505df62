"""CPU time of one planner simulation run: the catalog Qwen3-Omni 16 x A100 plan on the
planner's fixed request sample (``plan.refine.SampleRunner``, 1,200 requests), with the
runner's price book (step prices kept across runs, as the planner runs) and without.

    .venv/bin/python bench/bench_sim_sample.py [requests]

Four runs at 2, 3, 4 and 5 req/s after one warm-up run, each way, in one process; both give the
same goodputs. OMNIPLANE_PURE_PYTHON=1 runs the simulator as plain Python.
"""

from __future__ import annotations

import sys
import time

from omniplane.perf import CostModel
from omniplane.plan.refine import SampleRunner
from omniplane.sim import native
from omniplane.spec import load_gpus, load_plan, load_workload
from omniplane.spec.catalog import catalog_dir

RATES = (2.0, 3.0, 4.0, 5.0)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1200
    plan = load_plan(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
    wl = load_workload(catalog_dir() / "workloads" / "qwen3-omni-servegen.yaml")
    types = plan.model.type_names
    runner = SampleRunner(wl, {t: 1.0 / len(types) for t in types}, n, 0, CostModel(plan.model),
                          load_gpus(), {t: 1.0 for t in types})
    runner.run(plan.spec, 3.0)  # warm-up: the cost model's per-config constants
    out = {}
    for label, book in (("with the price book", runner.prices), ("without", None)):
        runner.prices = book  # type: ignore[assignment]
        c0 = time.process_time()
        runs = [runner.run(plan.spec, r) for r in RATES]
        out[label] = [float(o.goodput.sum()) for o in runs]
        print(f"{label:20s}: {(time.process_time() - c0) / len(RATES):.3f} s CPU per run "
              f"({n} requests; omniplane.sim runs {'compiled' if native.active() else 'plain Python'})")
    assert out["with the price book"] == out["without"], out
    print("same goodputs:", ", ".join(f"{g:.3f}" for g in out["without"]))


if __name__ == "__main__":
    main()
