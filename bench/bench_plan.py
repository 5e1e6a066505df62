"""Wall time of the whole planning pipeline for Qwen3-Omni on N x A100-80GB (default 16; issue
14: 64 within 60 s on this 2-core machine), with the candidate count and seconds of every phase.

    .venv/bin/python bench/bench_plan.py [gpus] [workload] [--profile] [--OPTION=VALUE ...]

(``--mc_tolerance=0.1`` and the like set ``PlannerOptions`` fields.)

Default workload: the catalog ``qwen3-omni-servegen`` mix (1/3 audio output). "profile" is
building the per-executor cost table and the latency targets; "planning" is enumerate, flow,
Monte Carlo, simulate and select with the default options (``PlannerOptions()``). The
baselines are not planned here (``omniplane plan`` does that). The load average is printed
because the machine is shared: compare figures taken in one run.
"""

from __future__ import annotations

import os
import sys
import time

from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner
from omniplane.plan.problem import make_problem
from omniplane.spec import find_catalog_workload, load_gpus, load_workload


def _value(default: object, text: str) -> object:
    """``text`` as the type of the option's default (an unset option: int, else float; "none": unset)."""
    if text.lower() == "none":
        return None
    if default is None:
        try:
            return int(text)
        except ValueError:
            return float(text)
    return type(default)(text)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gpus = int(args[0]) if args else 16
    name = args[1] if len(args) > 1 else "qwen3-omni-servegen"
    path = find_catalog_workload(name)
    assert path is not None, name
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    problem = make_problem(load_workload(path), load_gpus().get("A100-80GB"), gpus)
    m = problem.model
    print(f"model {m.name}: {len(m.components)} components, {len(problem.types)} types")
    opts = PlannerOptions(**{k: _value(getattr(PlannerOptions(), k), v) for k, v in
                             (a[2:].split("=") for a in sys.argv[1:] if a.startswith("--") and "=" in a)})
    print(f"options: {opts}")
    planner = Planner(problem, options=opts)
    t1 = time.perf_counter()
    result = planner.run()
    t2 = time.perf_counter()
    cpu = time.process_time() - cpu0
    print(f"{name} on {gpus} x A100-80GB")
    print(f"  profile and targets : {t1 - t0:6.2f} s")
    for phase, p in result.phases.items():
        count = f"{p.count:.3g}" if p.count > 1e6 else f"{int(p.count):,}"
        print(f"  {phase:<20}: {p.seconds:6.2f} s  {count:>10} candidates")
    print(f"  planning            : {t2 - t1:6.2f} s")
    print(f"  whole pipeline      : {t2 - t0:6.2f} s wall, {cpu:.2f} s CPU of this process")
    st = result.stats
    print(f"  logical plans {st.logical_total}, expanded {st.logical_expanded}, dropped by bound "
          f"{st.logical_bounded}, stopped by {st.stopped}; the selected plan's logical plan was expanded "
          f"#{result.extra.get('selected_logical_rank')}")
    print(f"  counts: {result.counts.to_json()}")
    print(f"  cuts: {[c['rule'] for c in result.cuts]}")
    acc = result.accuracy()
    print(f"  selected: {result.total:.2f} req/s simulated; flow+MC vs simulator mean abs. error "
          f"{acc.get('mean_abs_error', float('nan')):.1%} over {acc.get('plans', 0)} plans")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    if "--profile" in sys.argv:
        import cProfile
        import pstats

        cProfile.run("main()", "/tmp/bench_plan.prof")
        pstats.Stats("/tmp/bench_plan.prof").sort_stats("cumulative").print_stats(35)
    else:
        main()
