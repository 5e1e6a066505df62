"""KV-tight LLM executors: the thrash regime's busy share and the chance of reaching it, beside
the simulator's preemptions, on every plan a planning run simulates (planner and baselines):
a diagnostic of the KV-thrash regime (docs/decisions/0006-kv-thrash-charge.md; the regime was
the simulator's own admission rule, docs/decisions/0001-kv-admission-by-free-cache.md).

    .venv/bin/python scripts/kv_reach.py --gpus 8 --workload qwen3-omni-servegen

Per simulated plan and LLM component (first executor of each node), printed and not used by
the planner:

* ``K``, the KV tokens per LLM of the executor's config, the mean peak (prompt + output,
  ``parts.llm_peak``) mixed over the types routed there, and how many sequences fit at it; the
  component is KV-tight when the configured max batch times the peak exceeds ``K`` (the
  simulator, like vLLM, admits up to the configured batch while a KV token is free);
* ``full-batch u``: the executor's busy share at full batch, summed over its components
  (``montecarlo.occupancy``'s ``full``);
* ``thrash u``: the same with this component's KV full and preempting every iteration, each
  iteration carrying about ``m1 / 2`` recomputed prompt tokens (the derivation of
  docs/decisions/0010-kv-preemption-priced-in-monte-carlo.md: ``m1`` the mean KV tokens of a
  resident sequence, ``prompt + output / 2``)
  over ``min(b, K / m1)`` resident sequences. At or above 1 the thrash regime is absorbing
  (the executor cannot drain once it is in it);
* ``up-crossings``: the expected number of times over the simulated horizon that the Monte
  Carlo phase's occupancy law (Poisson with the Little's-law mean the phase uses for ``h_j``)
  reaches the number of sequences that no longer fit: ``horizon x lambda x P(N = n_sat - 1)``;
* the simulator's preemptions on that executor and the requests it held (mean, max).
"""

from __future__ import annotations

import estimate_vs_sim as evs  # scripts/, beside this file
import merged_trace as mt
import numpy as np
from scipy.stats import poisson

from omniplane.perf import ExecutorConfig
from omniplane.plan import montecarlo as mc
from omniplane.plan.emit import describe
from omniplane.plan.parts import llm_peak
from omniplane.sim import RunSetup
from omniplane.slo.resolve import target_array


def main() -> None:
    ap = evs.planning_parser(__doc__)
    args = ap.parse_args()
    pb, planner = evs.recorded_run(ap, args, baselines=True)
    tab, alpha, pi = planner.table, planner.options.alpha, pb.pi()
    slo = target_array(planner.targets, pb.types)
    arr = tab.arrays()
    for name, c, out, spec in evs.Recording.seen:
        good, _ = mc.evaluate(c, tab, pi, slo, alpha, planner.transfer_s)
        est, sim = float(good.sum()), float(out.goodput.sum())
        setup = RunSetup(prices=planner.simulator.prices)
        res, topo = mt._run(planner, spec, alpha * float(c.rate[0]), setup)
        pre = {ex.name: sum(getattr(e, "preemptions", 0) for e in ex.engines) for ex in topo.executors}
        print(f"[{name}] estimate {est:.3f} simulated {sim:.3f} ({(est - sim) / sim:+.1%}) {describe(spec)}, "
              f"horizon {res.horizon_s:.0f} s")
        lam = (alpha * c.rate)[:, None, None] * c.share[c.vec] * pi[None, None, :] / c.cnt[:, :, None]
        state = mc.node_states(c, tab, lam)
        for n, nc in enumerate(c.costs):
            o = int(c.opt[0, n])
            tp, b = nc.options[o]
            kv = tab.cost.check_fits(list(nc.comps), ExecutorConfig(pb.gpu, tp, b)).kv_capacity_tokens
            lam_n = lam[0, n, :]
            full = 0.0
            for comp in nc.comps:
                top = nc.part[comp][o][:, -1]
                full += float(sum(lam_n[t] * arr.cost[top[t]] for t in range(len(pi)) if top[t] >= 0))
            ex_name = next((ex.name for ex in topo.executors if ex.name.startswith(nc.name + "/")), nc.name)
            held = res.executors.get(ex_name, {})
            for comp in nc.comps:
                pid = nc.part[comp][o]
                ts = [t for t in range(len(pi)) if pid[t, 0] >= 0 and lam_n[t] > 0]
                if not tab.model.component(comp).is_llm or not ts:
                    continue
                lt = np.array([lam_n[t] for t in ts])
                w = lt / lt.sum()
                work = [tab.work[pb.types[t]] for t in ts]
                prompt = np.array([x.get(comp, "prompt_tokens").mean() for x in work])
                output = np.array([x.get(comp, "output_tokens").mean() for x in work])
                peak = float(w @ np.array([llm_peak(x, comp) for x in work]))
                m1 = float(w @ (prompt + output / 2))
                solo_first = np.array([arr.packed[pid[t, 0], 1].mean() for t in ts])
                s_tok = float(w @ (solo_first / np.maximum(prompt, 1.0)))  # prefill time per prompt token
                resident = min(b, kv / m1)
                thrash = float(lt.sum() * (w @ (output / resident)) * s_tok * m1 / 2)
                level, _, turns, _ = state[(n, comp)]
                k = int(level[0])
                res_t = np.array([arr.residence[pid[t, k]] + (arr.steps_mean[pid[t, k]] - 1) * turns[0]
                                  for t in ts])
                nbar = float(lt @ res_t)
                n_sat = int(kv // peak) + 1
                ups = res.horizon_s * lt.sum() * float(poisson.pmf(n_sat - 1, nbar))
                print(f"    {nc.name} x{c.cnt[0, n]} b{b} {comp}: K {kv} peak {peak:.0f} "
                      f"(KV-tight {b * peak > kv}, fits {kv / peak:.1f}), lambda {lt.sum():.2f}/s, "
                      f"full-batch u {full:.2f}, thrash u {full + thrash:.2f}; Monte Carlo held {nbar:.1f}, "
                      f"up-crossings of {n_sat} over the horizon {ups:.2g}; simulated: "
                      f"{pre.get(ex_name, 0)} preemptions, requests held {held.get('queue_mean', 0):.1f} "
                      f"(max {held.get('queue_max', 0)})")


if __name__ == "__main__":
    main()
