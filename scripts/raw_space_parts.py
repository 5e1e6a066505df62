"""What the planner's ``raw_space`` count is made of (docs/guides/plan.md, "Counts"): per
GPU budget, the count, the same count with the routing factor taken as 1 (logical plans x config
and count vectors), and the logical plans and subplans it runs over.

    .venv/bin/python scripts/raw_space_parts.py --gpus 8 16
"""

from __future__ import annotations

import argparse

import estimate_vs_sim as evs  # scripts/, beside this file

from omniplane.plan import order as od
from omniplane.plan import pipeline
from omniplane.plan.options import PlannerOptions
from omniplane.plan.problem import make_problem
from omniplane.plan.space import FULL
from omniplane.spec import load_gpus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--gpu", default="A100-80GB")
    ap.add_argument("--workload", default="qwen3-omni-servegen")
    args = ap.parse_args()
    wl = evs.catalog_workload(ap, args.workload)
    for gpus in args.gpus:
        pb = make_problem(wl, load_gpus().get(args.gpu), gpus)
        opt = PlannerOptions()
        planner = pipeline.Planner(pb, options=opt)
        order = od.LogicalOrder(planner.table, FULL, pb.pi(), gpus, opt.k_c, opt.k_s, opt.grid_steps,
                                opt.compose_compound)
        full = order.raw_space()
        log_comb, counts = od._log_comb, od._routings_counts
        try:  # the routing factor taken as 1: every type on one route
            od._log_comb = lambda steps, routes: 0.0  # type: ignore[assignment]
            od._routings_counts = lambda routes, steps: 1.0  # type: ignore[assignment]
            no_route = order.raw_space()
        finally:
            od._log_comb, od._routings_counts = log_comb, counts
        routes = max(len(r) for s in order.subs for r in s.routes)
        print(f"{gpus} GPUs: raw_space {full:.3g}; routing factor as 1 (logical plans x config x count "
              f"vectors) {no_route:.3g}; logical plans {order.total:,}, subplans {len(order.subs)}, "
              f"k_c {opt.k_c}, k_s {opt.k_s}, grid {opt.grid_steps} steps, at most {routes} routes per type "
              f"in a subplan")


if __name__ == "__main__":
    main()
