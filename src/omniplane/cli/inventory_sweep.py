"""``omniplane plan --inventory H100:8,L40S:16 --rates 2,5,10,20``: GPUs and cost per rate for the
inventory's cheapest subset that meets each rate (omniplane.plan.inventory.search at the rate) and
for each kind of the inventory alone (omniplane.plan.capacity, capped at the inventory's count of
that kind), as a table, JSON and a figure (omniplane.repro.capacity_figure, the same figure as
``plan --rates --figures``, with one more line: the inventory)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

from omniplane.cli.files import Outputs
from omniplane.cli.output import console, notice, print_json, print_table

MIXED = "inventory (mixed)"  # the inventory's line in the table and the figure


def run(a: dict[str, Any], bases: dict[str, Any], counts: dict[str, int], prices: dict[str, Any],
        rates: list[float], host: int, targets: Any) -> None:
    """``bases``: kind -> (base planner, space), as ``omniplane.cli.inventory`` makes them."""
    from omniplane.cli.capacity import _row
    from omniplane.plan.capacity import CapacityPlanner
    from omniplane.plan.inventory import HEURISTIC, search
    from omniplane.plan.prices import ATTRIBUTION, costs

    t_all = time.perf_counter()
    model = next(iter(bases.values()))[0].problem.model
    rows: list[dict[str, Any]] = []
    for rate in rates:
        t0 = time.perf_counter()
        res = search(bases, counts, prices, host_gpus=host, rate=rate, target=a["attainment"], compare=False,
                     say=lambda s, r=rate: notice(f"inventory @ {r:g}/s: {s}"))
        pick = res.pick
        rows.append({
            "rate": rate, "gpu": MIXED, "gpus": None if pick is None else sum(pick.gpus_by_kind().values()),
            "gpus_by_kind": None if pick is None else pick.gpus_by_kind(),
            "cost_per_hour": None if pick is None or pick.hourly is None else round(pick.hourly, 2),
            "attainment": {} if pick is None else {t: round(v, 4) for t, v in pick.attainment.items()},
            "plan": None if pick is None else pick.describe(model),
            "note": "" if pick is not None else f"none found within the inventory: {res.why}",
            "seconds": round(time.perf_counter() - t0, 2)})
        for kind, (base, space) in bases.items():
            t0 = time.perf_counter()
            cp = CapacityPlanner(base, rate, a["attainment"], space=space, progress=_say(kind, rate))
            lower = cp.lower_bound()
            if lower > counts[kind]:  # the flow relaxation alone needs more than the inventory holds
                rows.append(_alone(rate, kind, f"not within the inventory: the flow bound needs >= {lower} "
                                               f"{kind} GPUs, the inventory holds {counts[kind]}", t0))
                continue
            cap = cp.run(max_gpus=counts[kind], headroom=False)
            if cap.gpus is None or cap.gpus > counts[kind]:
                rows.append(_alone(rate, kind, f"not within the inventory: no count up to {counts[kind]} "
                                               f"{kind} GPUs meets {a['attainment']:.0%} of every type", t0))
                continue
            row = _row(cap, prices.get(kind), base.problem.mix, costs, time.perf_counter() - t0)
            row.pop("_plan", None)
            rows.append({"rate": rate, "gpu": kind, "gpus": row["gpus"], "gpus_by_kind": {kind: row["gpus"]},
                         "cost_per_hour": row["cost_per_hour"], "attainment": row["attainment"],
                         "plan": row["plan"], "note": "", "seconds": row["seconds"],
                         "one_fewer": row["one_fewer"]})
    written: list[Path] = []
    if a["figures"] is not None:
        from omniplane.repro.capacity_figure import write_sweep

        with Outputs() as files:
            written.append(write_sweep(rows, files.folder(a["figures"]), "inventory"))
            files.commit()
        written = [a["figures"] / p.name for p in written]
    doc = {"inventory_sweep": {
        "counts": counts, "host_gpus": host, "attainment_target": a["attainment"], "rows": rows,
        "inventory_rule": f"the cheapest subset of the inventory meeting the rate ({HEURISTIC})",
        "single_kind_rule": "the fewest GPUs of the kind alone whose best plan meets the rate "
                            "(omniplane plan --rate R --gpu KIND), at most the inventory's count of it",
        "prices": {k: {"usd_per_gpu_hour": p.usd_per_gpu_hour, "source": p.source, "date": p.date}
                   for k, p in prices.items() if k in counts},
        "cost_attribution": ATTRIBUTION,
        "targets_ms": dict(targets.targets_ms) if targets is not None else {},
        "targets_resolved_on": next(iter(counts)), "figures": [str(p) for p in written],
        "seconds": round(time.perf_counter() - t_all, 2)}}
    if a["json_out"]:
        print_json(doc)
        return
    _print(doc["inventory_sweep"])


def _say(kind: str, rate: float) -> Callable[[str], None]:
    return lambda s: notice(f"capacity {kind} @ {rate:g}/s: {s}")


def _alone(rate: float, kind: str, note: str, t0: float) -> dict[str, Any]:
    return {"rate": rate, "gpu": kind, "gpus": None, "gpus_by_kind": None, "cost_per_hour": None,
            "attainment": {}, "plan": None, "note": note, "seconds": round(time.perf_counter() - t0, 2)}


def _print(doc: dict[str, Any]) -> None:
    counts = ", ".join(f"{n} x {k}" for k, n in doc["counts"].items())
    table = Table(title=f"inventory {counts} (hosts of {doc['host_gpus']}): GPUs and cost per rate, "
                        f"every type at >= {doc['attainment_target']:.0%} attainment (simulated at the rate)")
    for col in ("rate", "what", "GPUs", "$/h", "plan", "s"):
        table.add_column(col, justify="right" if col in ("rate", "$/h", "s") else "left")
    for r in doc["rows"]:
        by = r["gpus_by_kind"]
        gpus = "-" if by is None else " + ".join(f"{n} {k}" for k, n in by.items())
        table.add_row(f"{r['rate']:g}", r["gpu"], gpus,
                      "-" if r["cost_per_hour"] is None else f"{r['cost_per_hour']:.2f}",
                      r["plan"] or r["note"], f"{r['seconds']:.0f}")
    print_table(table)
    console.print(f"inventory: {doc['inventory_rule']}", highlight=False)
    console.print(f"each kind alone: {doc['single_kind_rule']}", highlight=False)
    for k, p in doc["prices"].items():
        console.print(f"price {k}: ${p['usd_per_gpu_hour']:.2f}/GPU-h ({p['source']}, {p['date']})",
                      highlight=False)
    console.print(f"latency targets resolved on {doc['targets_resolved_on']}, used for every row",
                  highlight=False)
    for p in doc["figures"]:
        console.print(f"wrote {p}", highlight=False)
