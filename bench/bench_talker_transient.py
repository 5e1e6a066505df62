"""Why a short simulated sample can meet a rate its talkers cannot carry: Qwen3-Omni under
vLLM-Omni's pricing (``vllm-v1``), thinker stage on H100, talker+code2wav on another kind, at
one offered rate, for a short and a long request sample.

    .venv/bin/python bench/bench_talker_transient.py [KIND] [RATE] [TALKERS,...] [REQUESTS,...]

Defaults: L40S, 60 req/s, 3 and 8 talker executors (max batch 128, the inventory pick's), 1,200
(the planner's sample) and 4,800 requests; 8 H100 thinker executors (ample). Per run: the
arrival window, the talker's flow capacity (requests/s of the mix, ``omniplane.plan.inventory``
flow balance: executors / GPU-seconds per request at full batch), the audio requests still in
the talker at the window's end, the talker's frames/s per executor, the audio first-response
p50 / p95 (what the latency targets measure) and the median real-time factor of the audio
(code2wav done - arrival over the audio's length; above 1 the stream plays slower than real time).
"""

from __future__ import annotations

import sys

import numpy as np

from omniplane.perf import CostModel
from omniplane.plan.costs import CostTable
from omniplane.plan.inventory import Candidate, Option, best_option, to_spec
from omniplane.plan.problem import make_problem
from omniplane.plan.runtime import groupings, pricing_runtime
from omniplane.sim import native, simulate
from omniplane.spec import find_catalog_workload, load_gpus, load_workload, resolve_plan
from omniplane.spec.load import load_layout
from omniplane.workload import generate

TALKER = frozenset({"talker", "code2wav"})
FRAME_S = 0.08  # one 12.5 Hz codec frame


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else "L40S"
    rate = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    talkers = [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "3,8").split(",")]
    sizes = [int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "1200,4800").split(",")]
    path = find_catalog_workload("qwen3-omni-servegen")
    assert path is not None
    wl = load_workload(path)
    model, gpus = wl.model, load_gpus()
    cost = CostModel(model, runtime=pricing_runtime("vllm-omni"))
    pb = make_problem(wl, gpus.get(kind), 8, samples=128, seed=0)
    w = best_option(CostTable(pb, cost), TALKER, kind, pb.pi())
    assert w is not None
    grouping = next(g for g in groupings(model, load_layout(model.name)) if len(g) == 2 and TALKER in g)  # type: ignore[arg-type]
    thinker = next(n for n in grouping if "thinker" in n)
    audio = {t for t in model.type_names if "talker" in model.path_of(t)}
    print(f"talker+code2wav on {kind}: {w.w:.4f} GPU-s per request of the mix at full batch "
          f"(max batch {w.max_batch}); simulator {'compiled' if native.active() else 'plain Python'}")
    for n in sizes:
        base = generate(wl, n=n, rate=rate, seed=0)
        for k in talkers:
            opts = (Option("H100-SXM", 1, 256, 0.0), Option(kind, 1, w.max_batch, 0.0))
            spec = to_spec(model, Candidate((thinker, TALKER), opts, (8, k), 0.0), "probe", 8)
            rec = simulate(resolve_plan(spec, model, gpus), base, cost, seed=0).requests
            aud = np.array([t in audio for t in rec.type])
            frames = {r.id: r.work["talker"]["output_tokens"] for r in base if r.type in audio}
            f = np.array([frames[int(i)] for i in rec.rid[aud]])
            window = float(rec.arrival.max())
            done, c2w, arr = rec.done["talker"][aud], rec.done["code2wav"][aud], rec.arrival[aud]
            lat = rec.latency()[aud]
            print(f"{n:5d} requests ({window:5.1f} s), {k:2d} x {kind}: flow carries {k / w.w:5.1f} req/s; "
                  f"in the talker at the window's end {(done > window).sum():4d}; "
                  f"{f.sum() / np.nanmax(done) / k:4.0f} frames/s per executor; "
                  f"audio first response p50 {np.nanmedian(lat):6.2f} s, "
                  f"p95 {np.nanpercentile(lat, 95):6.2f} s; "
                  f"real-time factor p50 {np.nanmedian((c2w - arr) / (f * FRAME_S)):.2f}", flush=True)


if __name__ == "__main__":
    main()
