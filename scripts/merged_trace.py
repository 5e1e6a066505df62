"""What a merged executor does in the simulator beside what the Monte Carlo phase assumes of it:
a diagnostic of the Monte Carlo estimate (docs/results/plan.md; imported by
``scripts/estimate_vs_sim.py --trace N``).

For one simulated plan it re-runs the simulator with a step trace and prints, per executor and
hosted component, the busy share, the steps and the batch sizes the steps reached, beside the
Monte Carlo phase's occupancy level (its batch), busy share, turns and wait; then per request
type and component the mean time from arrival to the component's first output and completion
in the simulator and in the Monte Carlo composition (the type's most probable route).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from omniplane.plan import montecarlo as mc
from omniplane.plan.costs import FILLS, CostTable
from omniplane.plan.flow import Candidates
from omniplane.sim import RunSetup, SimRun
from omniplane.spec import PlanSpec, resolve_plan


def _run(planner: Any, spec: PlanSpec, rate: float, setup: RunSetup,
         kv_unbounded: bool = False) -> tuple[Any, Any]:
    """One simulator run of ``spec`` at ``rate`` on the planner's request sample: (result, topology)."""
    sim = planner.simulator
    plan = resolve_plan(spec, sim.model, sim.gpus)
    run = SimRun(plan.model, plan.spec, plan.gpu, sim.cost, setup)
    topo = run.topology
    if kv_unbounded:  # every LLM's KV cache unbounded: no preemption
        for ex in topo.executors:
            for e in ex.engines:
                if hasattr(e, "preemptions"):
                    e.kv_capacity = 1 << 40
    res = run.run(sim.at_rate(rate), seed=sim.seed, slo_s=sim.targets)
    return res, topo


def report(planner: Any, cands: Candidates, spec: PlanSpec) -> None:
    """Print the comparison for candidate 0 of ``cands`` (one plan) at ``alpha x R_d``."""
    pb, tab = planner.problem, planner.table
    alpha, pi = planner.options.alpha, pb.pi()
    rate = alpha * float(cands.rate[0])
    prices = planner.simulator.prices
    res, topo = _run(planner, spec, rate, RunSetup(prices=prices, trace=True, spans=False))
    for ex in topo.executors:
        llm = [f"{e.comp} KV {e.kv_capacity} tokens, {e.preemptions} preemptions" for e in ex.engines
               if hasattr(e, "preemptions")]
        if llm:
            print(f"  {ex.name}: " + "; ".join(llm))
    free, _ = _run(planner, spec, rate, RunSetup(prices=prices), kv_unbounded=True)
    print(f"  simulated goodput {res.goodput:.3f}; with unbounded KV caches (no preemption) "
          f"{free.goodput:.3f}: "
          + ", ".join(f"{t} {m.attainment or 0:.2f}/{free.per_type[t].attainment or 0:.2f}"
                      for t, m in res.per_type.items() if t in free.per_type))
    horizon = res.horizon_s
    print(f"  trace at {rate:.3f} req/s, horizon {horizon:.0f} s, window {res.window_s:.0f} s")
    for tr in res.trace:
        steps = np.array([(s[1] - s[0], s[4]) for s in tr.steps]) if tr.steps else np.zeros((0, 2))
        ex = res.executors.get(tr.name, {})
        print(f"  {tr.name}: utilisation {ex.get('utilisation', 0):.2f}, requests held mean "
              f"{ex.get('queue_mean', 0):.1f} max {ex.get('queue_max', 0)}")
        for comp in sorted({s[2] for s in tr.steps}):
            sel = np.array([s[2] == comp for s in tr.steps])
            dur, bat = steps[sel, 0], steps[sel, 1]
            print(f"    {comp}: busy {dur.sum() / horizon:.2f}, steps {sel.sum()}, mean step "
                  f"{dur.mean() * 1e3:.1f} ms (residual {(dur ** 2).sum() / (2 * dur.sum()) * 1e3:.1f}), "
                  f"batch mean {bat.mean():.1f} (time-weighted "
                  f"{(bat * dur).sum() / max(dur.sum(), 1e-12):.1f}) "
                  f"p90 {np.percentile(bat, 90):.0f}")
            kinds = np.array([s[3] for s in tr.steps])[sel]
            for kind in sorted(set(kinds)):
                m = kinds == kind
                print(f"      {kind}: {m.sum()} steps, mean {dur[m].mean() * 1e3:.1f} ms, "
                      f"batch {bat[m].mean():.1f}, time {dur[m].sum() / horizon:.2f}")
    lam = ((alpha * cands.rate)[:, None, None] * cands.share[cands.vec] * pi[None, None, :]
           / cands.cnt[:, :, None])
    state = mc.node_states(cands, tab, lam)
    _mc_nodes(cands, tab, lam, state)
    _per_type(planner, cands, tab, state, res, pi)


def _mc_nodes(cands: Candidates, tab: CostTable, lam: np.ndarray, state: mc.State) -> None:
    arr = tab.arrays()
    for n, nc in enumerate(cands.costs):
        opt = cands.opt[:, n]
        lam_n = lam[:, n, :]
        turns = {c: state[(n, c)][2] for c in nc.comps}
        levels, betas, steps, held, _, full, resid, _ = mc.occupancy(
            nc, opt, lam_n, arr, np.arange(1), turns, mc.arrival_cv2(tab), False)
        print(f"  Monte Carlo {nc.name} x{cands.cnt[0, n]} (per executor):")
        for c in nc.comps:
            bmax = nc.bmax[c][opt][0]
            served = lam_n[0] * (nc.part[c][opt][0, :, 0] >= 0)
            slots = float((served / max(served.sum(), 1e-300) * bmax).sum())
            k = int(levels[c][0])
            print(f"    {c}: level {k} (batch {max(1.0, slots * FILLS[k]):.1f} of {slots:.1f}), busy "
                  f"{betas[c][0]:.2f} (full-batch {full[c][0]:.2f}), step {steps[c][0] * 1e3:.1f} ms "
                  f"(residual {resid[c][0] * 1e3:.1f}), has work {held[c][0]:.2f}, turns "
                  f"{turns[c][0] * 1e3:.1f} ms, wait {state[(n, c)][1][0] * 1e3:.1f} ms")


def _per_type(planner: Any, cands: Candidates, tab: CostTable, state: mc.State, res: Any,
              pi: np.ndarray) -> None:
    rec = res.requests
    model = tab.model
    for t, routes in enumerate(cands.lp.routes):
        if pi[t] <= 0:
            continue
        tname = tab.types[t]
        r = int(np.argmax(cands.p[cands.vec[0], t, :len(routes)]))
        path, where, service = mc.route_services(tab, cands, state, t, routes[r])
        first, done = mc.path_times(model, path, where, service, planner.transfer_s)
        rows = rec.type == tname
        arrival = rec.arrival[rows]
        line = []
        for c in path:
            s_first = np.nanmean(rec.first_out[c][rows] - arrival) * 1e3
            s_done = np.nanmean(rec.done[c][rows] - arrival) * 1e3
            line.append(f"{c} first {float(first[c][0].mean()) * 1e3:.0f}/{s_first:.0f} done "
                        f"{float(done[c][0].mean()) * 1e3:.0f}/{s_done:.0f}")
        print(f"  {tname} (ms from arrival, Monte Carlo / simulated): " + "; ".join(line))
