"""Re-simulate the loads of an ``omniplane fidelity`` document without an engine
(docs/guides/check-your-engine.md, "Output"): each load's requests regenerated from the document's seed, the
simulator run on the step model refitted to that load's own probe rows (``as run``: reproduces
the document's simulated column) and, as what-ifs, to those rows plus the first probe's decode
bursts of 64 and more sequences (what a load's model saw before every probe measured them),
without the probes' mixed iterations (the additive step model, before the mixed terms were fitted), and
with the constant front end instead of the front-end CPU queue (before the queue was fitted; the
queue is refitted to the load's own probes' CPU readings, when the document has them). Per
load: TTFT / TPOT p50 and throughput against the measured column, the simulator's mean TTFT,
and the engine's own decomposition of each replay. Never fits anything to a replay.

    .venv/bin/python scripts/fidelity_resim.py out/fidelity.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from omniplane.fidelity.calibrate import Delivery
from omniplane.fidelity.compare import mean_ttft_ms, summarize
from omniplane.fidelity.engine import EngineConfig
from omniplane.fidelity.frontend import FrontEnd, cpu_samples, fit_frontend, measured_share
from omniplane.fidelity.idle import ColdStart, IdleSample, fit_cold
from omniplane.fidelity.simulate import simulate_engine
from omniplane.perf.profiler import PointMetrics
from omniplane.perf.profiles import ProfileRow
from omniplane.perf.steptime import MixedRow, fit_step_model
from omniplane.spec import load_workload
from omniplane.workload import generate

DATA = Path(__file__).resolve().parents[1] / "src" / "omniplane" / "fidelity" / "data"
BIG = 64  # decode bursts of at least this many sequences: the what-if's extra rows


def rows(probe: dict[str, Any], comp: str) -> list[ProfileRow]:
    return [ProfileRow(comp, "cpu", 1, r["op"], r["batch"], r["size"], r["ms"]) for r in probe["rows"]]


def mixed(probe: dict[str, Any]) -> list[MixedRow]:
    return [MixedRow(m["decodes"], m["chunk"], m["context"], m["ms"]) for m in probe.get("mixed", ())]


def points(probe: dict[str, Any]) -> list[PointMetrics]:
    """The probe's points as far as the front-end fit reads them (its CPU readings and counts)."""
    return [PointMetrics(p["request"], p["concurrency"], p["window_s"], p["n_window"], p["n_total"],
                         p["n_errors"], cpu_s=p.get("cpu_s") or {}, wall_s=p.get("wall_s", 0.0),
                         prompt_total=p.get("prompt_total", 0), output_total=p.get("output_total", 0))
            for p in probe.get("points", ())]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("doc", type=Path)
    ap.add_argument("--workload", type=Path, default=DATA / "tiny-qwen2-fidelity.yaml")
    a = ap.parse_args()
    doc = json.loads(a.doc.read_text())
    eng = doc["engine"]
    wl = load_workload(a.workload)
    comp = eng["component"]
    probes = eng["profile"]["probes"]
    engine = EngineConfig(eng["url"], eng["model"], eng["max_num_seqs"], eng["max_num_batched_tokens"],
                          eng["block_size"], eng["num_gpu_blocks"], eng["max_model_len"])
    limits = engine.limits()
    big = [r for r in rows(probes[0], comp) if r.op == "decode" and r.batch >= BIG]
    for i, (detail, load) in enumerate(zip(eng["loads"], doc["loads"], strict=True)):
        cal = detail["calibration"]
        reqs = generate(wl, duration_s=eng["duration_s"], rate=load["offered_rps"], seed=eng["seed"] + 10 + i)
        delivery = Delivery(cal["delivery"]["base_ms"] / 1e3, cal["delivery"]["per_stream_ms"] / 1e3)
        own = [r for k in cal["probes"] for r in rows(probes[k], comp)]
        own_mixed = [x for k in cal["probes"] for x in mixed(probes[k])]
        has_big = any(r.op == "decode" and r.batch >= BIG for r in own)
        latency = cal["frontend_ms"] / 1e3
        samples = cpu_samples([p for k in cal["probes"] for p in points(probes[k])])
        queue = fit_frontend(samples, latency)
        share = measured_share(samples)
        at_share = fit_frontend(samples, latency, cores=share) if share else queue
        const = FrontEnd(latency)
        cold = fit_cold([IdleSample(s["gap_ms"], s["idle_ms"], s["ttft_ms"])
                         for k in cal["probes"] for s in probes[k].get("idle", ())])
        warm = ColdStart()
        variants = [("as run" + (" (front-end queue)" if queue.queued else ""), own, own_mixed, queue, cold)]
        variants += [] if has_big else [(f"+ probe 0's decode >= {BIG}", own + big, own_mixed, queue, cold)]
        variants += [("additive (no mixed terms)", own, [], queue, cold)] if own_mixed else []
        variants += [("constant front end (no queue)", own, own_mixed, const, cold)] if queue.queued else []
        variants += [("no cold start after idle", own, own_mixed, queue, warm)] if cold.idle_s else []
        if share:
            variants.append((f"queue at the probes' runnable share {share:.3f}", own, own_mixed, at_share,
                             cold))
        if queue.queued:
            print(f"load {detail['fraction']:.0%} queue: {queue.per_request_s * 1e3:.3f} ms/request, "
                  f"{queue.per_prompt_token_s * 1e6:.3f} us/prompt token, {queue.per_token_s * 1e3:.4f} "
                  f"ms/token, {queue.per_iteration_s * 1e3:.4f} ms/iteration ({len(queue.samples)} samples), "
                  f"runnable share of a core {share or 0:.3f}")
        m = load["measured"]
        for name, rs, mx, fe, cs in variants:
            step = fit_step_model(rs, comp, limits, source="fidelity_resim", mixed=mx)
            stats: dict[str, float] = {}
            pred = simulate_engine(wl.model, engine, step, reqs, latency, delivery, stats, queue=fe, cold=cs)
            s = summarize(pred)

            def err(k: str, s: dict[str, float | None] = s, m: dict[str, float | None] = m) -> str:
                sv, mv = s[k], m[k]
                return f"{sv:.1f} vs {mv:.1f} ({sv / mv - 1:+.1%})" if sv is not None and mv else "-"

            it128 = step.time(decode_batch=128, decode_context=128 * 32) * 1e3
            print(f"load {detail['fraction']:.0%} {name}: TTFT p50 {err('ttft_p50_ms')}; TPOT p50 "
                  f"{err('tpot_p50_ms')}; throughput {err('throughput_rps')}; simulated mean TTFT "
                  f"{mean_ttft_ms(pred) or 0:.1f} ms; a 128 x 32-token decode iteration {it128:.1f} ms"
                  + (f"; front end busy {stats['frontend_busy']:.2f}" if "frontend_busy" in stats else ""))
        for rep in detail["repeats"]:
            sm = rep["server_ms"]
            print(f"    replay: client TTFT p50 {rep['summary']['ttft_p50_ms']:.1f} ms; engine: vLLM TTFT "
                  f"{sm['ttft']:.1f} = API server {sm['ttft'] - sm['queue'] - sm['prefill']:.1f} + queue "
                  f"{sm['queue']:.1f} + prefill {sm['prefill']:.1f}; inter-token {sm['itl']:.1f} ms")


if __name__ == "__main__":
    main()
