"""Does pinning the load generator off vLLM's worker core make replays repeatable?

One vLLM server on the tiny fixture (vLLM's CPU build, .venv-vllm); the same seeded
``tiny-qwen2-fidelity`` stream replayed ``--rounds`` times in each of two modes, **interleaved on
the same engine** (``pinned, unpinned, unpinned, pinned, ...``) so that both modes meet the same
spread of host load:

* ``pinned``: :func:`omniplane.loadgen.affinity.separate`: the load generator and the server's
  threads that vLLM did not bind (API server, engine core) on the cores vLLM's worker did not
  take; undone after the replay;
* ``unpinned``: everything free to run on every core (vLLM's worker stays on its own binding).

Per mode: TTFT p50 / TPOT p50 of each replay, their spread ((max - min) / median: the
replay-to-replay noise floor of ``omniplane fidelity``), and how late the client sent requests.
``uptime`` before and after every replay. A measurement of the environment, not of omniplane.

    .venv-vllm/bin/python bench/bench_fidelity_pinning.py [--rate 8] [--duration 20] [--rounds 3] \\
        [--out out/fidelity-pinning.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from _live import alternating, fixture_llm, fixture_server  # first: skips without vLLM, puts src/ on the path

from omniplane.fidelity.compare import measured_timings, summarize
from omniplane.fidelity.server import VllmServer
from omniplane.loadgen.affinity import Pinning, separate
from omniplane.loadgen.client import LoadOptions, replay
from omniplane.loadgen.metrics import send_lateness
from omniplane.workload import generate


@contextlib.contextmanager
def mode(name: str, pgid: int) -> Iterator[Pinning]:
    if name == "pinned":
        with separate(pgid, restore_group=True) as pin:
            yield pin
    else:
        yield Pinning(False, note="unpinned (A/B)")


def spread(xs: list[float]) -> float | None:
    return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 and statistics.median(xs) else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=8.0)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("out/fidelity-pinning.json"))
    a = ap.parse_args()
    wl, model, comp = fixture_llm()
    requests = generate(wl, duration_s=a.duration, rate=a.rate, seed=0)
    warm = generate(wl, duration_s=5.0, rate=a.rate, seed=1)
    spec = fixture_server(model.name, a.out.parent / "fidelity-pinning-vllm.log")
    order = alternating(("pinned", "unpinned"), a.rounds)
    runs: list[dict[str, Any]] = []
    with VllmServer(spec) as server:
        load = LoadOptions(server.url, api="completions", model=model.name, component=comp,
                           vocab=int(model.component(comp).size.vocab or 0), drain_s=60.0)
        asyncio.run(replay(warm, replace(load, run_id="warm-")))
        for k, name in enumerate(order):
            before = os.getloadavg()
            with mode(name, server.pgid) as pin:
                records = asyncio.run(replay(requests, replace(load, run_id=f"ab{k}-")))
            s = summarize(measured_timings(records))
            late = send_lateness(records)
            runs.append({"mode": name, "pinning": pin.to_json(), "load_before": before,
                         "load_after": os.getloadavg(), "send_late_ms": late,
                         "completed": sum(r.status == "completed" for r in records), **s})
            print(f"{k} {name}: TTFT p50 {s['ttft_p50_ms']:.1f} ms, TPOT p50 {s['tpot_p50_ms']:.1f} ms, "
                  f"late p99 {late.get('p99', 0):.0f} ms, load {before[0]:.1f}", flush=True)
    summary = {}
    for name in ("pinned", "unpinned"):
        mine = [r for r in runs if r["mode"] == name]
        summary[name] = {
            "ttft_p50_ms": [r["ttft_p50_ms"] for r in mine], "tpot_p50_ms": [r["tpot_p50_ms"] for r in mine],
            "ttft_p50_spread": spread([r["ttft_p50_ms"] for r in mine]),
            "tpot_p50_spread": spread([r["tpot_p50_ms"] for r in mine]),
            "send_late_p99_ms": [r["send_late_ms"].get("p99") for r in mine],
            "late_sends": sum(r["send_late_ms"].get("over", 0) for r in mine),
        }
    doc = {"rate": a.rate, "duration_s": a.duration, "requests": len(requests), "order": order,
           "runs": runs, "summary": summary}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
