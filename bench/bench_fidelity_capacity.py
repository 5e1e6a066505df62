"""Is ``omniplane fidelity``'s capacity loop bound by the client? Both pinning layouts, interleaved.

One vLLM server on the tiny fixture (vLLM's CPU build, .venv-vllm); the fidelity loop's capacity
point (a closed loop of ``max_num_seqs`` workers sending the workload's sizes, its steady-state
window ``--window`` s long) measured ``--rounds`` times in each of two layouts of
:func:`omniplane.loadgen.affinity.separate`, **interleaved on the same engine** (``worker,
client, client, worker, ...``) so that both meet the same spread of host load:

* ``worker``: the worker alone on its core, the API server, the engine core and the load
  generator on the other (the default layout, docs/decisions/0109-client-pin-layout.md);
* ``client``: the load generator alone on the other core, the API server and the engine core
  with the worker.

Per run: the capacity (requests per second in the window), each part's busy cores over the run
(:func:`omniplane.loadgen.affinity.cpu_split`: worker process, the engine's other processes,
this process), and what the client saw against what the engine stamped (client TTFT minus
vLLM's own TTFT, client TPOT against vLLM's inter-token latency): a client-bound loop shows a
client side that is large against the engine's. ``uptime`` before and after every run. A
measurement of the environment, not of omniplane.

    .venv-vllm/bin/python bench/bench_fidelity_capacity.py [--rounds 2] [--window 20] \\
        [--out out/fidelity-capacity.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from _live import alternating, fixture_llm, fixture_server  # first: skips without vLLM, puts src/ on the path

from omniplane.fidelity.calibrate import ProbePlan, capacity_spec
from omniplane.fidelity.engine import read_engine_config
from omniplane.fidelity.server import VllmServer
from omniplane.loadgen.affinity import cpu_split, separate
from omniplane.perf.profiler import ProfileRun, run_profile
from omniplane.workload import generate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=Path("out/fidelity-capacity.json"))
    a = ap.parse_args()
    wl, model, comp = fixture_llm()
    sizes = [(int(r.work[comp]["prompt_tokens"]), int(r.work[comp]["output_tokens"]))
             for r in generate(wl, n=256, seed=1)]
    spec = fixture_server(model.name, a.out.parent / "fidelity-capacity-vllm.log")
    order = alternating(("worker", "client"), a.rounds)
    runs: list[dict[str, Any]] = []
    with VllmServer(spec) as server:
        engine = read_engine_config(server.url, {})
        point = capacity_spec(ProbePlan(capacity_s=a.window), engine, sizes)
        base = ProfileRun(server.url, model.name, comp, "cpu", 1, (point,), requests_per_worker=1,
                          api="completions", vocab=int(model.component(comp).size.vocab or 0))
        for k, layout in enumerate(order):
            before = os.getloadavg()
            with separate(server.pgid, restore_group=True, layout=layout) as pin:
                c0, t0 = cpu_split(server.pgid, pin.worker_pids), time.monotonic()
                res = run_profile(replace(base, salt=7000 + k))
                c1, wall = cpu_split(server.pgid, pin.worker_pids), time.monotonic() - t0
            p = res.points[0]
            sm = p.server_s
            ttft, tpot = p.median("ttft"), p.median("tpot")
            busy_cores = {key: (c1[key] - c0[key]) / wall for key in c1}
            run: dict[str, Any] = {
                   "layout": layout, "pinning": pin.to_json(), "load_before": before,
                   "load_after": os.getloadavg(),
                   "capacity_rps": p.request_throughput, "window_n": p.n_window, "errors": p.n_errors,
                   "busy_cores": busy_cores, "wall_s": wall,
                   "client_ttft_p50_ms": ttft * 1e3 if ttft is not None else None,
                   "engine_ttft_mean_ms": sm["ttft"] * 1e3 if "ttft" in sm else None,
                   "client_tpot_p50_ms": tpot * 1e3 if tpot is not None else None,
                   "engine_itl_mean_ms": sm["itl"] * 1e3 if "itl" in sm else None,
                   "client_side_ms": p.frontend_s * 1e3 if p.frontend_s is not None else None}
            runs.append(run)
            busy = ", ".join(f"{key} {v:.2f}" for key, v in busy_cores.items())
            print(f"{k} {layout}: capacity {p.request_throughput:.2f} req/s; busy cores {busy}; "
                  f"client TTFT p50 {run['client_ttft_p50_ms'] or 0:.0f} vs engine TTFT mean "
                  f"{run['engine_ttft_mean_ms'] or 0:.0f} ms; client TPOT p50 "
                  f"{run['client_tpot_p50_ms'] or 0:.1f} vs engine ITL mean "
                  f"{run['engine_itl_mean_ms'] or 0:.1f} ms; load {before[0]:.1f} -> "
                  f"{os.getloadavg()[0]:.1f}",
                  flush=True)
    doc = {"window_s": a.window, "order": order, "runs": runs}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
