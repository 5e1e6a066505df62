"""Score plan files the way the planner scores its own: same request sample, same latency
targets, same simulator, best total goodput over a grid of offered rates (the paper's metric,
Cornfigurator section 6.1). Used for docs/results/plan.md, "The paper's plans in our simulator".

    .venv/bin/python scripts/score_plans.py --model qwen3-omni --gpus 16 \\
        --workload qwen3-omni-servegen PLAN.yaml [PLAN.yaml ...] [--json]

The grid is ``base x (0.25 .. 1.6)``, ``base`` the first plan's ``prediction.offered_rps`` (pass the
planner's own plan first so every plan is swept over the same rates).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner
from omniplane.plan.problem import make_problem
from omniplane.spec import find_catalog_workload, load_gpus, load_model, load_plan, load_workload

SCALES = (0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.15, 1.3, 1.6)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plans", nargs="+")
    ap.add_argument("--model", required=True)
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--gpu", default="A100-80GB")
    ap.add_argument("--workload", required=True)
    ap.add_argument("--rate", type=float,
                    help="base offered rate (default: the first plan's prediction.offered_rps)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    model = load_model(args.model)
    wl = load_workload(find_catalog_workload(args.workload) or args.workload)
    options = PlannerOptions()
    problem = make_problem(wl, load_gpus().get(args.gpu), args.gpus, samples=options.mc_samples, seed=0)
    planner = Planner(problem, options=options)
    sim = planner.simulator
    specs = [load_plan(p).spec for p in args.plans]
    first = specs[0]
    if args.rate:
        base = args.rate
    elif first.prediction is not None:  # the load the planner evaluated its plan under
        base = first.prediction.offered_rps
    else:
        ap.error(f"{args.plans[0]}: the plan has no prediction.offered_rps; pass --rate")
    out = []
    for path, spec in zip(args.plans, specs, strict=True):
        runs = [sim.run(spec, base * s) for s in SCALES]
        best = max(runs, key=lambda o: float(o.goodput.sum()))
        gpus_by_node = {n.name: sum(e.count * e.tp for e in n.executors) for n in spec.nodes}
        talk = sum(g for n, g in gpus_by_node.items()
                   if {"talker", "code2wav"} & set(next(x for x in spec.nodes if x.name == n).components))
        out.append({"plan": path, "name": spec.name, "gpus": spec.gpus, "talker_code2wav_gpus": talk,
                    "best_rate": round(best.rate, 4), "goodput_total": round(float(best.goodput.sum()), 4),
                    "per_type": {t: round(float(g), 4) for t, g in zip(sim.types, best.goodput, strict=True)},
                    "sweep": [{"rate": round(o.rate, 4), "goodput": round(float(o.goodput.sum()), 4)}
                              for o in runs]})
    doc = {"model": model.name, "gpus": args.gpus, "workload": wl.spec.name, "base_rate": base,
           "targets_ms": {t: round(1e3 * s, 1) for t, s in planner.targets.seconds.items()},
           "requests_per_run": options.sim_requests, "plans": out}
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        for p in out:
            print(f"{p['name']}: {p['goodput_total']:.3f} req/s at {p['best_rate']:.3f} req/s offered; "
                  f"talker+code2wav GPUs {p['talker_code2wav_gpus']}/{p['gpus']}")
    _ = np
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
