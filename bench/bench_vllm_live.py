"""HorizonServe on a live vLLM engine: one seeded mixed bursty stream per rate (the tiny fixture's
``tiny-qwen2-mixed`` workload: short text requests, bursty long prompts) replayed against vLLM's
own scheduler (``bare``) and omniplane's scheduler class running ``fcfs`` and ``horizon``, each
on a freshly started engine (vLLM's CPU build, .venv-vllm) that replays every rate's stream in
turn (``--rate`` first, then ``--extra-rates``). Per class: TTFT p50/p95 and SLO attainment; per
stream: throughput three ways (omniplane.fidelity.throughput: over the span to the last
completion, over the arrival window, output tokens/s in its steady middle), the engine's own
mean queue / prefill / TTFT, exactly-once completion against the engine's own counters; per
engine (``--capacity S``) the closed-loop capacity. The wrapper's cost is each wrapped run
against the bare run of the same repeat (``wrapper_cost``), summarised as median [min-max].

The machine is shared: runs of one policy far apart in time see different loads. Policies run
in rotating order for ``--repeats`` rounds so that each one meets the same spread of loads;
``uptime`` is recorded before and after every run. Each engine runs as ``omniplane fidelity
--fixture`` does: the load generator, the API server and the engine core pinned off the worker's
core, the engine core at niceness 19 (``--nice-engine-core``; ``runs[].pinning``).

    .venv-vllm/bin/python bench/bench_vllm_live.py [--rate 3] [--extra-rates 22] [--duration 60] \\
        [--repeats 2] [--capacity 20] [--out out/vllm-live.json]
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

from omniplane.fidelity.schedlive import (
    COST_METRICS,
    POLICIES,
    LiveSchedOptions,
    class_table,
    run_one,
    stream_label,
    wrapper_cost,
)
from omniplane.fixture import ensure_model_dir
from omniplane.spec import load_workload
from omniplane.workload import generate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=3.0)
    ap.add_argument("--extra-rates", default="", help="comma-separated further rates, same engines")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--capacity", type=float, default=0.0, help="capacity window, seconds (0: skip)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--nice-engine-core", type=int, default=19,
                    help="the engine core's niceness once the client is pinned (0: leave it)")
    ap.add_argument("--out", type=Path, default=Path("out/vllm-live.json"))
    a = ap.parse_args()
    wl = load_workload(FIXTURE_DATA / "tiny-qwen2-mixed.yaml")
    a.workload_name = wl.spec.name
    extra = tuple(float(x) for x in a.extra_rates.split(",") if x)
    opts = LiveSchedOptions(str(ensure_model_dir()), wl, a.rate, a.duration, extra_rates=extra,
                            capacity_s=a.capacity, nice_engine_core=a.nice_engine_core,
                            log_dir=a.out.parent / "vllm-live-logs")
    opts.log_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
    slo_s, table = class_table(wl, opts.long_types)
    streams = {stream_label(r): generate(wl, duration_s=a.duration, rate=r, seed=0) for r in (a.rate, *extra)}
    policies = a.policies.split(",")
    runs: list[dict[str, Any]] = []
    for rep in range(a.repeats):
        order = policies[rep % len(policies):] + policies[:rep % len(policies)]
        for p in order:
            load, up = os.getloadavg(), _uptime()
            r = run_one(p, opts, streams, table, slo_s, lambda m: print(m, flush=True))
            r.update(repeat=rep, load_before=load, load_after=os.getloadavg(), uptime_before=up,
                     uptime_after=_uptime())
            runs.append(r)
            show(r)
            write(a.out, a, extra, streams, slo_s, runs, policies)  # every run: a stopped bench keeps it
    doc = write(a.out, a, extra, streams, slo_s, runs, policies)
    print(json.dumps(doc["summary"], indent=2))


def write(out: Path, a: argparse.Namespace, extra: tuple[float, ...], streams: dict[str, Any],
          slo_s: dict[str, float], runs: list[dict[str, Any]], policies: list[str]) -> dict[str, Any]:
    cost = wrapper_cost(runs)
    done = [p for p in policies if any(r["policy"] == p for r in runs)]
    doc = {"workload": a.workload_name, "rates": [a.rate, *extra], "duration_s": a.duration,
           "requests": {k: len(v) for k, v in streams.items()},
           "slo_ms": {k: v * 1e3 for k, v in slo_s.items()}, "nice_engine_core": a.nice_engine_core,
           "summary_note": "per policy: median, min and max over its repeats; wrapper_cost: "
                           "(wrapped - bare) / bare against the bare run of the same repeat",
           "runs": runs, "wrapper_cost": cost, "summary": summarize_runs(runs, cost, done)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def summarize_runs(runs: list[dict[str, Any]], cost: list[dict[str, Any]],
                   policies: list[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for p in policies:
        mine = [r for r in runs if r["policy"] == p]
        costs = [c for c in cost if c["policy"] == p]
        per_stream = {}
        for label in mine[0]["streams"]:
            ms = [r["streams"][label] for r in mine]
            per_stream[label] = {
                "exactly_once": all(m["exactly_once"]["ok"] for m in ms),
                "throughput": {k: _spread([m["throughput"][k] for m in ms]) for k in COST_METRICS},
                "vs_bare": {k: _spread([c["streams"][label][k] for c in costs]) for k in COST_METRICS},
                "per_class": {c: {k: _spread([m["per_class"][c][k] for m in ms])
                                  for k in ("p50_ttft_ms", "p95_ttft_ms", "attainment")}
                              for c in ms[0]["per_class"]},
            }
        summary[p] = {"repeats": len(mine), "streams": per_stream,
                      "capacity_rps": _spread([r.get("capacity_rps") for r in mine]),
                      "capacity_vs_bare": _spread([c["capacity"] for c in costs]),
                      "capacity_tokens_per_s": _spread([r.get("capacity_tokens_per_s") for r in mine]),
                      "capacity_tokens_vs_bare": _spread([c.get("capacity_tokens") for c in costs])}
    return summary


def _spread(xs: list[Any]) -> dict[str, float] | None:
    vals = [x for x in xs if x is not None]
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals)} if vals else None


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def show(r: dict[str, Any]) -> None:
    load = f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"
    print(f"{r['policy']} (repeat {r['repeat']}, load {load}): capacity {r.get('capacity_rps')}")
    for label, m in r["streams"].items():
        t = m["throughput"]
        print(f"  {label}: exactly once {m['exactly_once']['ok']}, span {_f(t['span_rps'])} req/s, "
              f"window {_f(t['window_rps'])} req/s, steady {_f(t['steady_tokens_per_s'])} tok/s, "
              f"engine ms { {k: round(v) for k, v in m['server_ms'].items()} }")
        for c, v in m["per_class"].items():
            print(f"    {c}: TTFT p50 {_f(v['p50_ttft_ms'])} ms, p95 {_f(v['p95_ttft_ms'])} ms, "
                  f"attainment {_f(v['attainment'])} (SLO {v['slo_ms']} ms)", flush=True)


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}" if abs(x) < 10 else f"{x:.0f}"


if __name__ == "__main__":
    main()
