"""Optimality by exhaustive simulation (issue 14, "Must show"): plan a small instance, then
simulate every physical plan of the space (every logical plan of k_c/k_s, every config, count
and routing vector on the grid; redundant count vectors too unless --non-redundant) with the
planner's own simulator, sample and targets, each at alpha x its R_d as the planner does, and
report the best against the pick.

    .venv/bin/python bench/bench_optimality.py --workload qwen3-vl-servegen --gpus 4 [--k-c 2 --k-s 2]
        [--non-redundant] [--routing-step 0.1] [--mc-samples 32 --sim-requests 150] [--json] [--top 10]

``--non-redundant`` simulates only the plans the flow phase keeps (section 4.3's exact rule:
no executor beyond its node's demand at R_d); the full space is every count vector.
``--top N`` lists the N best simulated plans with the flow rate R_d and the flow + Monte Carlo
estimate beside each (why the search did not pick one: the estimate's ranking, or a cut).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass

import numpy as np

from omniplane.plan import montecarlo as mc
from omniplane.plan.emit import to_spec
from omniplane.plan.enumerate import compound_subplans, logical_plans, simple_subplans
from omniplane.plan.flow import Candidates, Expansion, exhaustive
from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner
from omniplane.plan.problem import make_problem
from omniplane.plan.routing import routing_vectors
from omniplane.plan.slo import target_array
from omniplane.spec import find_catalog_workload, load_gpus, load_workload


@dataclass
class Outcome:
    pick: float  # the planner's pick, simulated
    best: float  # the best plan of the space, simulated
    best_plan: str
    plans: int  # physical plans simulated
    logical: int
    plan_s: float
    exhaustive_s: float
    pick_estimate: float = 0.0  # the pick's flow + Monte Carlo estimate
    top: tuple[tuple[float, float, float, str], ...] = ()  # (simulated, estimate, R_d, plan), best first

    @property
    def gap(self) -> float:
        return self.best / self.pick - 1.0 if self.pick > 0 else float("inf")


def space(planner: Planner, k_c: int, k_s: int, redundant: bool) -> tuple[list[Candidates], int]:
    pb = planner.problem
    opts = planner.options
    simple = simple_subplans(pb.model)
    subs = simple + compound_subplans(pb.model, simple, k_c)
    out: list[Candidates] = []
    n_lp = 0
    for lp in logical_plans(subs, len(pb.types), k_s):
        n_lp += 1
        vecs = routing_vectors(lp, opts.grid_steps, opts.max_routings)
        if redundant:
            out.append(exhaustive(lp, planner.table, vecs, pb.pi(), pb.gpus))
            continue
        allowed = [np.arange(len(planner.table.node(n).options)) for n in lp.nodes]
        exp = Expansion(lp, planner.table, vecs, pb.pi(), pb.gpus, allowed)
        opt, vec, top, cnt = exp.rows(0.0)
        out.append(exp.elements(opt, vec, top, cnt, 0.0))
    return out, n_lp


def run(workload: str, gpus: int, k_c: int, k_s: int, redundant: bool, mc_samples: int,
        sim_requests: int, max_simulated: int | None, routing_step: float = 0.1, top: int = 0) -> Outcome:
    wl = load_workload(find_catalog_workload(workload) or workload)
    pb = make_problem(wl, load_gpus().get("A100-80GB"), gpus, samples=mc_samples)
    opts = PlannerOptions(k_c=k_c, k_s=k_s, mc_samples=mc_samples, sim_requests=sim_requests,
                          max_simulated=max_simulated, routing_step=routing_step)
    planner = Planner(pb, options=opts)
    t0 = time.perf_counter()
    picked = planner.run()
    plan_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    blocks, n_lp = space(planner, k_c, k_s, redundant)
    slo = target_array(planner.targets, pb.types)
    rows: list[tuple[float, float, float, str]] = []
    for cands in blocks:
        est = mc.evaluate(cands, planner.table, pb.pi(), slo, opts.alpha, planner.transfer_s)[0].sum(axis=1)
        for i in range(len(cands)):
            spec = to_spec(cands, i, pb.model, pb.gpu.name, gpus, planner.transfer_s * 1e3)
            got = float(planner.simulator.run(spec, opts.alpha * float(cands.rate[i])).goodput.sum())
            rows.append((got, float(est[i]), float(cands.rate[i]),
                         " + ".join(f"{e.count}x ({nd.name}, tp{e.tp}, b{e.max_batch})"
                                    for nd in spec.nodes for e in nd.executors)))
    rows.sort(key=lambda r: -r[0])
    best, best_plan = (rows[0][0], rows[0][3]) if rows else (0.0, "")
    return Outcome(picked.total, best, best_plan, len(rows), n_lp, plan_s, time.perf_counter() - t1,
                   float(picked.best.estimate.sum()) if picked.best is not None else 0.0,
                   tuple(rows[:top]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--k-c", type=int, default=2)
    ap.add_argument("--k-s", type=int, default=2)
    ap.add_argument("--non-redundant", action="store_true")
    ap.add_argument("--mc-samples", type=int, default=32)
    ap.add_argument("--sim-requests", type=int, default=150)
    ap.add_argument("--max-simulated", type=int, default=None)
    ap.add_argument("--routing-step", type=float, default=0.1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--top", type=int, default=0, help="list the N best simulated plans with their estimates")
    a = ap.parse_args(argv)
    out = run(a.workload, a.gpus, a.k_c, a.k_s, not a.non_redundant, a.mc_samples, a.sim_requests,
              a.max_simulated, a.routing_step, a.top)
    doc = {"workload": a.workload, "gpus": a.gpus, "k_c": a.k_c, "k_s": a.k_s, "routing_step": a.routing_step,
           "pick_estimate": out.pick_estimate,
           "space": "non-redundant" if a.non_redundant else "every count vector",
           "logical_plans": out.logical,
           "plans_simulated": out.plans, "pick": out.pick, "best": out.best, "gap": out.gap,
           "best_plan": out.best_plan, "plan_s": out.plan_s, "exhaustive_s": out.exhaustive_s,
           "top": [{"simulated": g, "estimate": e, "R_d": r, "plan": d} for g, e, r, d in out.top]}
    if a.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        for k, v in doc.items():
            print(f"{k:16}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
