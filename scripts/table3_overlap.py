"""Where HorizonServe's Table 3 check moves: per policy, the shared stage's TPOT p50 beside what
its decode steps met on the shared GPU (docs/results/perf.md, "HorizonServe Table 3"). A
measurement, not a fit.

    .venv/bin/python scripts/table3_overlap.py [GPU] [RATE] [--requests N]

GPU is a testbed key (``rtx6000ada``, ``rtxpro6000``); the runs are those of
``omniplane.repro.horizon.table3`` (Qwen2.5-Omni, long fraction 0.3, max_num_seqs 1, seed 0), with step
traces on. Per policy: the share of the shared stage's decode steps that overlap a downstream
step in time, the step time alone and overlapped (p50), and the share of time the shared stage
holds more than one request (its queue behind max_num_seqs 1 is not empty).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from omniplane.repro.horizon.experiment import single_gpu
from omniplane.repro.horizon.table3 import LONG_FRACTION, POLICIES
from omniplane.sched.factory import make_policy
from omniplane.sched.memsignal import MemoryActivity
from omniplane.sim import RunSetup, SharedGPU, SimRun
from omniplane.spec import PathClass


def overlap_row(testbed: Any, policy_name: str, rate: float, requests: int, seed: int = 0) -> dict[str, Any]:
    cal = testbed.calibration
    policy, mode = make_policy(policy_name, cal.profiles, cal.ladder)
    setup = RunSetup(policy_for=lambda ex, c: policy if c == testbed.shared else None,
                     max_seqs=testbed.max_seqs, token_budget=testbed.token_budget, trace=True,
                     shared_gpu=SharedGPU("stage0/0.0", testbed.downstream, mode,
                                          MemoryActivity() if mode != "timeslice" else None))
    plan = testbed.resolved
    run = SimRun(plan.model, plan.spec, plan.gpu, testbed.cost, setup)
    res = run.run(testbed.requests(rate, LONG_FRACTION, requests, seed), slo_s=cal.slo.as_dict())
    topo, loop = run.topology, run.loop
    shared, *others = topo.executors
    down = sorted(s for ex in others for s in (ex.stats.trace or []))
    starts, ends = np.array([d[0] for d in down]), np.array([d[1] for d in down])
    steps = [(a, b) for a, b, comp, kind, _ in (shared.stats.trace or [])
             if comp == testbed.shared and kind == "decode"]
    dur = np.array([b - a for a, b in steps]) * 1e3
    hit = np.array([bool(np.any((starts < b) & (ends > a))) for a, b in steps])
    times = np.array([t for t, _ in shared.stats.queue] + [loop.now])
    held = np.array([n for _, n in shared.stats.queue])
    dt = np.diff(times)
    tpot = res.requests.tpot[testbed.shared] * 1e3
    longs = {r.name for r in testbed.model.request_types if r.path_class is PathClass.LONG}
    is_long = np.array([str(t) in longs for t in res.requests.type])
    ok = ~np.isnan(tpot)
    return {"policy": policy_name, "mode": mode, "tpot_p50": float(np.percentile(tpot[ok], 50)),
            "tpot_p50_short": float(np.percentile(tpot[ok & ~is_long], 50)),
            "tpot_p50_long": float(np.percentile(tpot[ok & is_long], 50)),
            "overlapped": float(hit.mean()), "alone_p50": float(np.percentile(dur[~hit], 50)),
            "overlapped_p50": float(np.percentile(dur[hit], 50)) if hit.any() else float("nan"),
            "held_over_one": float(dt[held > 1].sum() / dt.sum()) if dt.sum() > 0 else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gpu", nargs="?", default="rtx6000ada")
    ap.add_argument("rate", nargs="?", type=float, default=0.5)
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args()
    testbed = single_gpu("qwen2.5-omni", args.gpu, 1)
    print("| policy | GPU sharing | TPOT p50 ms (short / long) | decode steps overlapping a downstream step "
          "| step alone p50 ms | overlapped p50 ms | thinker holds > 1 request |")
    print("|---|---|---|---|---|---|---|")
    for name in POLICIES:
        r = overlap_row(testbed, name, args.rate, args.requests)
        print(f"| {r['policy']} | {r['mode']} | {r['tpot_p50']:.2f} ({r['tpot_p50_short']:.2f} / "
              f"{r['tpot_p50_long']:.2f}) | {r['overlapped']:.1%} | {r['alone_p50']:.2f} | "
              f"{r['overlapped_p50']:.2f} | {r['held_over_one']:.1%} |", flush=True)


if __name__ == "__main__":
    main()
