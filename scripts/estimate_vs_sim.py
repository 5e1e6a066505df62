"""Flow + Monte Carlo against the simulator, per plan and per type, on every plan a planning run
simulates (the planner's space and, with --baselines, the baselines'): the diagnostic behind
the estimate errors of docs/results/plan.md.

    .venv/bin/python scripts/estimate_vs_sim.py --gpus 8 --workload qwen3-omni-servegen --baselines

Each simulated candidate is re-estimated (the same candidate, profile and targets) and printed
with its simulated total and per-type attainment beside the estimate's, and the Monte Carlo
phase's wait before service per hosted component (step in progress, turns, admission queue).
"""

from __future__ import annotations

import argparse
from typing import ClassVar

import merged_trace  # scripts/, beside this file
import numpy as np

from omniplane.plan import montecarlo as mc
from omniplane.plan import pipeline
from omniplane.plan.baselines import baseline_spaces
from omniplane.plan.emit import describe
from omniplane.plan.flow import Candidates
from omniplane.plan.options import PlannerOptions
from omniplane.plan.problem import Problem, make_problem
from omniplane.plan.refine import SimOutcome
from omniplane.plan.space import FULL
from omniplane.slo.resolve import target_array
from omniplane.spec import PlanSpec, ResolvedWorkload, find_catalog_workload, load_gpus, load_workload


class Recording(pipeline.SimOracle):
    """The pipeline's simulator oracle, keeping every simulated candidate."""

    seen: ClassVar[list[tuple[str, Candidates, SimOutcome, PlanSpec]]] = []

    def simulate(self, cands: Candidates, i: int) -> SimOutcome:
        out = super().simulate(cands, i)
        self.seen.append((self.space.name, cands.take(np.array([i])), out, self.specs[(id(cands), i)]))
        return out


def planning_parser(doc: str | None) -> argparse.ArgumentParser:
    """The planning run's arguments these scripts share: --model, --gpus, --gpu, --workload."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-omni")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--gpu", default="A100-80GB")
    ap.add_argument("--workload", default="qwen3-omni-servegen")
    return ap


def catalog_workload(ap: argparse.ArgumentParser, name: str, model: str | None = None) -> ResolvedWorkload:
    """The catalog workload ``name`` (an argparse error naming ``--workload`` when there is none,
    or when ``model`` is given and the workload is for another model)."""
    path = find_catalog_workload(name)
    if path is None:
        ap.error(f"--workload {name!r}: no catalog workload of that name")
    wl = load_workload(path)
    if model is not None and wl.model.name != model:
        ap.error(f"--workload {name!r} is for model {wl.model.name!r}, not {model!r}")
    return wl


def recorded_run(ap: argparse.ArgumentParser, args: argparse.Namespace, baselines: bool,
                 max_simulated: int | None = None) -> tuple[Problem, pipeline.Planner]:
    """Plan ``args.model`` on ``args.gpus`` x ``args.gpu`` for ``args.workload`` (the planner's
    space and, with ``baselines``, the baselines'), every simulated candidate kept in
    :attr:`Recording.seen`."""
    wl = catalog_workload(ap, args.workload, args.model)
    pb = make_problem(wl, load_gpus().get(args.gpu), args.gpus)
    planner = pipeline.Planner(pb, options=PlannerOptions(max_simulated=max_simulated))
    pipeline.SimOracle = Recording  # type: ignore[misc]
    spaces = [FULL] + (list(baseline_spaces(pb.model)) if baselines else [])
    for space in spaces:
        if space.split is None:  # a derived model (EPD) has its own profile: not re-estimated here
            planner.run(space)
    return pb, planner


def main() -> None:
    ap = planning_parser(__doc__)
    ap.add_argument("--baselines", action="store_true", help="also the baselines' spaces")
    ap.add_argument("--max-simulated", type=int, default=None)
    ap.add_argument("--trace", type=int, default=0, metavar="K",
                    help="re-simulate the K most over-estimated plans with a step trace "
                    "(scripts/merged_trace.py)")
    args = ap.parse_args()
    pb, planner = recorded_run(ap, args, args.baselines, args.max_simulated)
    slo = target_array(planner.targets, pb.types)
    tab, alpha, pi = planner.table, planner.options.alpha, pb.pi()
    errors: dict[str, list[float]] = {}
    worst: list[tuple[float, Candidates, PlanSpec]] = []
    for name, c, out, spec in Recording.seen:
        good, att = mc.evaluate(c, tab, pi, slo, alpha, planner.transfer_s)
        est, sim = float(good.sum()), float(out.goodput.sum())
        err = (est - sim) / sim if sim > 0 else float("inf")
        errors.setdefault(name, []).append(err)
        worst.append((err, c, spec))
        print(f"[{name}] estimate {est:.3f} simulated {sim:.3f} ({err:+.1%})  {describe(spec)}")
        lam = (alpha * c.rate)[:, None, None] * c.share[c.vec] * pi[None, None, :] / c.cnt[:, :, None]
        state = mc.node_states(c, tab, lam)
        for n, nc in enumerate(c.costs):
            waits = " ".join(f"{comp} {state[(n, comp)][1][0] * 1e3:.0f} ms" for comp in nc.comps)
            print(f"    {nc.name} x{c.cnt[0, n]}: wait before service {waits}")
        print("    attainment (estimate / simulated): " + ", ".join(
            f"{t} {att[0, k]:.2f}/{out.attainment[k]:.2f}" for k, t in enumerate(pb.types) if pi[k] > 0))
    for name, errs in errors.items():
        print(f"{name}: mean abs. error {np.mean(np.abs(errs)):.1%} over {len(errs)} simulated plans")
    for err, c, spec in sorted(worst, key=lambda w: -w[0])[:args.trace]:
        print(f"\ntraced ({err:+.1%}): {describe(spec)}")
        merged_trace.report(planner, c, spec)


if __name__ == "__main__":
    main()
