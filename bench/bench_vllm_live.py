"""HorizonServe on a live vLLM engine: one seeded mixed bursty stream (the tiny fixture's
``tiny-qwen2-mixed`` workload: short text requests, bursty long prompts) replayed against vLLM's
own scheduler (``bare``) and omniplane's scheduler class running ``fcfs`` and ``horizon``, each
on a freshly started engine (vLLM's CPU build, .venv-vllm). Per class: TTFT p50/p95 and SLO
attainment; per run: throughput, exactly-once completion against the engine's own counters,
and (``--capacity S``) the engine's closed-loop capacity, whose bare-vs-wrapped ratio is the
wrapper's throughput cost at saturation.

The machine is shared: runs of one policy far apart in time see different loads. Policies run
in rotating order for ``--repeats`` rounds so that each one meets the same spread of loads;
``uptime`` is recorded before and after every run. Each engine runs as ``omniplane fidelity
--fixture`` does: the load generator, the API server and the engine core pinned off the worker's
core, the engine core at niceness 19 (``--nice-engine-core``; ``runs[].pinning``).

    .venv-vllm/bin/python bench/bench_vllm_live.py [--rate 3] [--duration 60] [--repeats 2] \\
        [--capacity 20] [--out out/vllm-live.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

from _live import FIXTURE_DATA  # first: skips without vLLM, puts src/ on the path

from omniplane.fidelity.fixture import ensure_model_dir
from omniplane.fidelity.schedlive import POLICIES, LiveSchedOptions, class_table, run_one
from omniplane.spec import load_workload
from omniplane.workload import generate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=3.0)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--capacity", type=float, default=0.0, help="capacity window, seconds (0: skip)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--nice-engine-core", type=int, default=19,
                    help="the engine core's niceness once the client is pinned (0: leave it)")
    ap.add_argument("--out", type=Path, default=Path("out/vllm-live.json"))
    a = ap.parse_args()
    wl = load_workload(FIXTURE_DATA / "tiny-qwen2-mixed.yaml")
    opts = LiveSchedOptions(str(ensure_model_dir()), wl, a.rate, a.duration, capacity_s=a.capacity,
                            nice_engine_core=a.nice_engine_core, log_dir=a.out.parent / "vllm-live-logs")
    opts.log_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
    slo_s, table = class_table(wl, opts.long_types)
    requests = generate(wl, duration_s=a.duration, rate=a.rate, seed=0)
    policies = a.policies.split(",")
    runs: list[dict[str, Any]] = []
    for rep in range(a.repeats):
        order = policies[rep % len(policies):] + policies[:rep % len(policies)]
        for p in order:
            load, up = os.getloadavg(), _uptime()
            r = run_one(p, opts, requests, table, slo_s, lambda m: print(m, flush=True))
            r.update(repeat=rep, load_before=load, load_after=os.getloadavg(), uptime_before=up,
                     uptime_after=_uptime())
            runs.append(r)
            show(r)
    summary = {}
    for p in policies:
        mine = [r for r in runs if r["policy"] == p]
        summary[p] = {
            "repeats": len(mine),
            "exactly_once": all(r["exactly_once"]["ok"] for r in mine),
            "throughput_rps": _spread([r["overall"]["throughput_rps"] for r in mine]),
            "capacity_rps": _spread([r.get("capacity_rps") for r in mine]),
            "per_class": {c: {k: _spread([r["per_class"][c][k] for r in mine])
                              for k in ("p50_ttft_ms", "p95_ttft_ms", "attainment")}
                          for c in mine[0]["per_class"]},
        }
    doc = {"workload": wl.spec.name, "rate": a.rate, "duration_s": a.duration, "requests": len(requests),
           "slo_ms": {k: v * 1e3 for k, v in slo_s.items()}, "nice_engine_core": a.nice_engine_core,
           "summary_note": "per policy: median, min and max over its repeats", "runs": runs,
           "summary": summary}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


def _spread(xs: list[Any]) -> dict[str, float] | None:
    vals = [x for x in xs if x is not None]
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals)} if vals else None


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def show(r: dict[str, Any]) -> None:
    o = r["overall"]
    load = f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"
    print(f"{r['policy']} (repeat {r['repeat']}, load {load}): "
          f"exactly once {r['exactly_once']['ok']}, {o['throughput_rps']:.2f} req/s, capacity "
          f"{r.get('capacity_rps')}")
    for c, m in r["per_class"].items():
        print(f"  {c}: TTFT p50 {m['p50_ttft_ms']:.0f} ms, p95 {m['p95_ttft_ms']:.0f} ms, "
              f"attainment {m['attainment']:.1%} (SLO {m['slo_ms']:.0f} ms)", flush=True)


if __name__ == "__main__":
    main()
