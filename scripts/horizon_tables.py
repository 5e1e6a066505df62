"""Every HorizonServe table of docs/results/sched.md, from one command.

    .venv/bin/python scripts/horizon_tables.py --seeds 0,1,2 --jobs 2 --out out/horizon.json
    .venv/bin/python scripts/horizon_tables.py --out docs/data/horizon-vllm-stressed.json --print  # tables

Each run is one ``SingleGPU.run`` (``omniplane experiment horizon`` runs the same: ``rate x 900 s``
of Poisson arrivals, drained, windowed figure over the 900 s), keyed by table, model, GPU, point,
``max_num_seqs``, policy and seed; the JSON is rewritten after every run, so an interrupted
command resumes where it stopped (finished keys are not re-run). ``--plan full`` runs every table
at every seed; ``--plan lean`` the same, ordered so that every table gets seed 0 first;
``--tables`` keeps only the named tables, ``--policies`` the named policies;
``--max-seqs`` is the stressed points' sweep.
Figure 10 (``fig10``) is :func:`omniplane.repro.horizon.experiment.control_trace` per GPU, signal window
and seed. Prints markdown; runtime is printed at the end (with ``uptime``'s load average).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

QWEN = "qwen2.5-omni"
# the issue's stressed points: (GPU, rate, long fraction)
STRESSED = (
    ("rtx6000ada", 0.5, 0.3),
    ("rtxpro6000", 0.45, 0.3),
    ("rtx6000ada", 0.35, 0.6),
    ("rtxpro6000", 0.35, 0.6),
)
PAPER_BASELINES = ("vanilla", "edf", "mps", "edf-mps")  # section 6.1
SWEEP_POLICIES = ("mps", "edf-mps", "static-split", "horizon", "no-rotation", "no-sm-throttle")
TIMESLICE = ("vanilla", "edf")
SHIPPED = ("priority", "static-cap")  # baselines that ship today (vLLM, SGLang-Omni)
WINDOWS: tuple[float | None, ...] = (None, 1.0 / 6.0, 1.0)  # Figure 10: per step, NVML's two ends


def _entries(
    table: str,
    points: Iterable[tuple[str, str, float, float]],
    max_seqs: int,
    policies: Iterable[str],
    seeds: Iterable[int],
    **extra: Any,
) -> list[dict[str, Any]]:
    return [
        dict(table=table, model=m, gpu=g, rate=r, frac=f, max_seqs=max_seqs, policy=p, seed=s, **extra)
        for s in seeds
        for (m, g, r, f) in points
        for p in policies
    ]


QWEN_STRESSED = tuple((QWEN, g, r, f) for g, r, f in STRESSED)
ADA_STRESSED = tuple(p for p in QWEN_STRESSED if p[1] == "rtx6000ada")
MIMO = (("mimo-audio", "rtx6000ada", 0.3, 0.3), ("mimo-audio", "rtx6000ada", 0.5, 0.3))
BAGEL = (("bagel", "rtx6000ada", 0.35, 0.4), ("bagel", "rtx6000ada", 0.35, 0.6))
FIG10 = ((QWEN, "rtx6000ada", 0.3, 0.4), (QWEN, "rtxpro6000", 0.3, 0.4))
CORE = ("mps", "edf-mps", "horizon", "no-rotation", "no-sm-throttle")


def plan(name: str, seeds: tuple[int, ...], max_seqs: tuple[int, ...]) -> list[dict[str, Any]]:
    """``full``: every table at every seed; ``lean``: the same in an order that gives every table
    seed 0 first (what a loaded 2-core machine finishes in an hour), then the other seeds."""
    first, rest = seeds[:1], seeds[1:]
    fig10 = [_entries("fig10", FIG10, 4, ("horizon",), seeds, window=w) for w in WINDOWS]
    sweeps = [
        _entries(
            f"stressed{ms}",
            QWEN_STRESSED,
            ms,
            (*TIMESLICE, *SHIPPED, *SWEEP_POLICIES) if ms == 4 else SWEEP_POLICIES,
            seeds,
        )
        for ms in max_seqs
    ]
    models = [
        _entries("mimo", MIMO, 4, ("vanilla", "mps", "horizon"), seeds),
        _entries("bagel", BAGEL, 4, ("vanilla", "mps", "static-split", "horizon"), seeds),
    ]
    if name == "full":
        return [t for group in (*fig10, *sweeps, *models) for t in group]
    if name != "lean":
        raise SystemExit(f"unknown plan {name!r}: full or lean")
    out = _entries("fig10", FIG10, 4, ("horizon",), seeds, window=1.0 / 6.0)
    out += _entries("fig10", FIG10, 4, ("horizon",), first, window=None)
    out += _entries("stressed4", QWEN_STRESSED, 4, (*TIMESLICE, *SWEEP_POLICIES), first)
    for ms in (m for m in max_seqs if m != 4):
        out += _entries(
            f"stressed{ms}", ADA_STRESSED, ms, ("mps", "horizon", "no-rotation", "no-sm-throttle"), first
        )
    out += _entries("mimo", MIMO, 4, ("vanilla", "mps", "horizon"), first)
    out += _entries("bagel", BAGEL, 4, ("vanilla", "mps", "static-split", "horizon"), first)
    out += _entries("stressed4", QWEN_STRESSED, 4, CORE, rest)
    out += _entries("mimo", MIMO, 4, ("vanilla", "mps", "horizon"), rest)
    out += _entries("bagel", BAGEL, 4, ("vanilla", "mps", "static-split", "horizon"), rest)
    out += _entries("fig10", FIG10, 4, ("horizon",), first, window=1.0)
    return out + plan("full", seeds, max_seqs)


def key(t: dict[str, Any]) -> str:
    return "|".join(f"{k}={t[k]}" for k in sorted(t))


@lru_cache(maxsize=4)
def testbed_for(model: str, gpu: str, max_seqs: int, window: float | None, runtime: str) -> Any:
    from omniplane.repro.horizon.experiment import SingleGPU

    return SingleGPU(model, gpu, max_seqs=max_seqs, signal_window_s=window, runtime=runtime)


def run(t: dict[str, Any]) -> dict[str, Any]:
    from omniplane.repro.horizon.experiment import POINT_S, control_trace
    from omniplane.sched.spatial import SpatialConfig, level_thresholds

    # runs without a "runtime" key were measured before it existed, on the "vllm" runtime
    testbed = testbed_for(t["model"], t["gpu"], t["max_seqs"], t.get("window", 1.0 / 6.0),
                          t.get("runtime", "vllm"))
    t0 = time.perf_counter()
    if t["table"] == "fig10":
        tr = control_trace(testbed, round(t["rate"] * POINT_S), t["seed"], t["rate"], t["frac"])
        d, b = np.asarray(tr.downstream), np.asarray(tr.bw_util)
        p, c = np.asarray(tr.pressure), np.asarray(tr.sm_cap)
        co = d > 0
        caps = {int(v): int(n) for v, n in zip(*np.unique(c[co], return_counts=True), strict=True)}
        lad, b_sat = testbed.calibration.ladder, SpatialConfig().b_sat
        cuts = level_thresholds(lad, b_sat)
        pc = p[co]
        # Equation 1 before snapping, and snapped, on the same B_hat: how the cap follows B_hat
        target = lad.s_min + np.clip(pc / b_sat, 0.0, 1.0) * (lad.s_cap - lad.s_min)
        again = np.asarray([lad.levels[lad.snap(float(x))] for x in target], dtype=float)
        return {
            "cap_is_eq1_fraction": float(np.mean(again == c[co])) if co.any() else float("nan"),
            "target_co_mean": float(target.mean()) if co.any() else float("nan"),
            "target_co_sd": float(target.std()) if co.any() else float("nan"),
            "bhat_thresholds": [round(x, 4) for x in cuts],  # B_hat where Equation 1's level changes
            "bhat_co_pct": {q: float(np.percentile(pc, q)) for q in (5, 50, 95)},
            # co-running steps whose B_hat lies in each band between thresholds (band i -> level i)
            "bhat_co_bands": [int(n) for n in np.bincount(np.searchsorted(cuts, pc, side="left"),
                                                          minlength=len(cuts) + 1)],
            **t,
            "ladder": list(testbed.calibration.ladder.levels),
            "steps": len(d),
            "co_running_fraction": float(co.mean()),
            "b_alone": float(b[~co].mean()),
            "b_co": float(b[co].mean()),
            "bhat_co_sd": float(p[co].std()),
            "bhat_co_min": float(p[co].min()),
            "bhat_co_max": float(p[co].max()),
            "corr_co": tr.correlation(True),
            "corr_all": tr.correlation(),
            "caps_co": caps,
            "wall_s": time.perf_counter() - t0,
        }
    n = round(t["rate"] * POINT_S)
    r = testbed.run(t["policy"], t["rate"], t["frac"], n, t["seed"], window_s=POINT_S)
    d = asdict(r)
    d.pop("trace", None)
    longs = {x.name for x in testbed.model.request_types if x.path_class.value == "long"}
    return {**t, **d, "long_classes": sorted(longs), "wall_s": time.perf_counter() - t0}


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=lambda v: None))
    os.replace(tmp, path)


def fmt(xs: list[float]) -> str:
    m = 100 * float(np.mean(xs))
    return f"{m:.1f} [{'/'.join(f'{100 * x:.1f}' for x in xs)}]"


def executor(rs: list[dict[str, Any]], node: str) -> str:
    """Mean over seeds of one node's busy fraction and held requests (time mean / max)."""
    es = [e for r in rs for name, e in r.get("executors", {}).items() if name.startswith(node + "/")]
    if not es:
        return "-"
    busy = 100 * np.mean([e["utilisation"] for e in es])
    return f"{busy:.0f}, {np.mean([e['queue_mean'] for e in es]):.2f} / {max(e['queue_max'] for e in es):.0f}"


def _order(kv: tuple[tuple[Any, ...], Any]) -> tuple[Any, ...]:
    """stressed points by max_num_seqs, then MiMo-Audio, then BAGEL; points by GPU, rate, fraction."""
    table = str(kv[0][0])
    rank = (0, int(table.removeprefix("stressed"))) if table.startswith("stressed") else (1, table != "mimo")
    return (*rank, *kv[0][1:])


def point_tables(rows: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["table"], r["model"], r["gpu"], r["rate"], r["frac"], r["max_seqs"]), []).append(
            r
        )
    for (table, model, gpu, rate, frac, ms), rs in sorted(groups.items(), key=_order):
        out += [
            f"**{model}, {gpu}, rate {rate}, long fraction {frac}, max_num_seqs {ms}** ({table})",
            "",
            "| policy | attainment % drained, mean [per seed] | windowed (900 s) | short classes "
            "| long classes | TPOT p50 ms | shared stage busy %, queue mean / max "
            "| downstream busy %, queue mean / max |",
            "|---|---|---|---|---|---|---|---|",
        ]
        by: dict[str, list[dict[str, Any]]] = {}
        for r in sorted(rs, key=lambda r: r["seed"]):
            by.setdefault(r["policy"], []).append(r)
        means: dict[str, float] = {}
        seeds_of: dict[str, tuple[int, ...]] = {}
        for pol, prs in by.items():
            att = [x["attainment"] for x in prs]
            means[pol] = float(np.mean(att))
            seeds_of[pol] = tuple(x["seed"] for x in prs)
            longs = set(prs[0]["long_classes"])

            def cls(x: dict[str, Any], want_long: bool, longs: set[str] = longs) -> float:
                v = [a for c, a in x["attainment_by_class"].items() if (c in longs) == want_long]
                return float(np.mean(v)) if v else math.nan

            short = np.mean([cls(x, False) for x in prs])
            long_ = np.mean([cls(x, True) for x in prs])
            win = np.mean([x["attainment_window"] for x in prs])
            tpot = np.mean([x["shared_tpot_ms"]["p50"] for x in prs])
            out.append(
                f"| {pol} | {fmt(att)} | {100 * win:.1f} | {100 * short:.1f} | {100 * long_:.1f} "
                f"| {tpot:.1f} | {executor(prs, 'stage0')} | {executor(prs, 'stage1')} |"
            )
        out.append("")
        if "horizon" in means:
            h, hs = means["horizon"], seeds_of["horizon"]
            same = [p for p in means if seeds_of[p] == hs]
            base = [p for p in PAPER_BASELINES if p in same]
            notes = [f"seeds {list(hs)}"]
            if base:
                best = max(base, key=lambda p: means[p])
                notes.append(
                    f"horizon / best paper baseline ({best}) = {h / means[best]:.2f}x"
                    if means[best] > 0
                    else f"best paper baseline ({best}) 0%"
                )
            for abl in ("no-rotation", "no-sm-throttle", "static-split"):
                if abl in same:
                    notes.append(f"horizon - {abl} {100 * (h - means[abl]):+.1f} points")
            if "vanilla" in same:
                hv = np.mean([x["shared_tpot_ms"]["p50"] for x in by["horizon"]])
                vv = np.mean([x["shared_tpot_ms"]["p50"] for x in by["vanilla"]])
                notes.append(f"TPOT p50 horizon / vanilla {hv:.1f} / {vv:.1f} ms = {hv / vv:.2f}x")
            out += ["; ".join(notes), ""]
    return out


def _pct(r: dict[str, Any]) -> str:
    q = r.get("bhat_co_pct")  # rows measured before this column was added lack it
    return "-" if not q else "/".join(f"{q[k]:.3f}" for k in sorted(q, key=float))


def _num(r: dict[str, Any], k: str, spec: str) -> str:
    return "-" if k not in r else format(r[k], spec)


def fig10_table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "**Figure 10** (Qwen2.5-Omni, rate 0.3, 40% speech, max_num_seqs 4, HorizonServe; mean over seeds "
        "[per seed])",
        "",
        "| GPU | signal window | B alone | B co-running | B_hat co-running sd [min, max] "
        "| caps while co-running (steps, seed 0) | corr(B_hat, cap), co-running | all steps "
        "| B_hat co-running p5/p50/p95 (seed 0) | level thresholds of B_hat | steps per band (seed 0) "
        "| cap = Eq. 1 of B_hat (share of co-running steps, seed 0) | unsnapped Eq. 1 target, SMs (seed 0) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["gpu"], r["window"]), []).append(r)
    for (gpu, w), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0.0)):
        rs.sort(key=lambda r: r["seed"])
        win = "one step (per-step signal)" if w is None else f"{w:.3g} s"
        cc = [r["corr_co"] for r in rs]
        ca = [r["corr_all"] for r in rs]
        out.append(
            f"| {gpu} | {win} | {np.mean([r['b_alone'] for r in rs]):.3f} | "
            f"{np.mean([r['b_co'] for r in rs]):.3f} | {np.mean([r['bhat_co_sd'] for r in rs]):.3f} "
            f"[{min(r['bhat_co_min'] for r in rs):.2f}, {max(r['bhat_co_max'] for r in rs):.2f}] | "
            f"{rs[0]['caps_co']} | {np.mean(cc):.3f} [{'/'.join(f'{x:.2f}' for x in cc)}] | "
            f"{np.mean(ca):.3f} | {_pct(rs[0])} | {rs[0].get('bhat_thresholds', '-')} | "
            f"{rs[0].get('bhat_co_bands', '-')} | {_num(rs[0], 'cap_is_eq1_fraction', '.4f')} | "
            f"{_num(rs[0], 'target_co_mean', '.1f')} sd {_num(rs[0], 'target_co_sd', '.2f')} |"
        )
    return [*out, ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--plan", default="full", help="full (every table, every seed) or lean (seed 0 first)")
    ap.add_argument(
        "--tables", default=None, help="only these tables (comma-separated; e.g. fig10,stressed4)"
    )
    ap.add_argument("--policies", default=None, help="only these policies (comma-separated)")
    ap.add_argument("--max-seqs", default="4,8,16,32")
    ap.add_argument("--out", type=Path, default=Path("docs/data/horizon-vllm-before-retiming.json"))
    ap.add_argument("--runtime", default="vllm",
                    help="the testbed's serving runtime (vllm-omni-paper-testbed or "
                         "vllm-omni-paper-bandwidth: "
                         "omniplane.repro.horizon.testbed)")
    ap.add_argument("--print", action="store_true", help="print the tables from --out; run nothing")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    max_seqs = tuple(int(s) for s in a.max_seqs.split(",") if s.strip())
    tables = None if a.tables is None else {t.strip() for t in a.tables.split(",") if t.strip()}
    pols = None if a.policies is None else {p.strip() for p in a.policies.split(",") if p.strip()}
    data = load(a.out)
    t0 = time.time()
    if not a.print:
        todo, seen = [], set(data)
        for t in plan(a.plan, tuple(seeds), max_seqs):
            t = {**t, "runtime": a.runtime}
            if key(t) not in seen and (tables is None or t["table"] in tables) and (
                pols is None or t.get("policy") in pols):
                seen.add(key(t))
                todo.append(t)
        print(f"{len(todo)} runs to do ({len(data)} done in {a.out})", flush=True)
        with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            futs = {pool.submit(run, t): t for t in todo}
            for i, f in enumerate(as_completed(futs), 1):
                t = futs[f]
                data[key(t)] = f.result()
                save(a.out, data)
                print(f"[{i}/{len(todo)}] {key(t)} {data[key(t)]['wall_s']:.0f} s", flush=True)
    rows = list(data.values())
    lines = point_tables([r for r in rows if r["table"] != "fig10"]) + fig10_table(
        [r for r in rows if r["table"] == "fig10"]
    )
    print("\n".join(lines))
    load_avg = os.getloadavg()
    print(
        f"\nwall {time.time() - t0:.0f} s with --jobs {a.jobs}; "
        f"load average {load_avg[0]:.1f} {load_avg[1]:.1f} {load_avg[2]:.1f}"
    )


if __name__ == "__main__":
    main()
