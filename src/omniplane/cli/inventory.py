"""``omniplane plan --inventory H100:8,L40S:16``: the best plan within a mixed inventory
(omniplane.plan.inventory), against each kind alone at the same hourly cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from omniplane.cli.errors import fail
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, notice, print_json, print_table
from omniplane.errors import InputError


def from_plan(a: dict[str, Any], workload: Any, parse_mix: Any) -> None:
    """``a``: omniplane plan's arguments (``--inventory``, ``--host-gpus``, ``--rate``, ...)."""
    from omniplane.cli.capacity import _base_planner
    from omniplane.plan.inventory import InventoryError, parse_inventory, search
    from omniplane.plan.prices import load_prices
    from omniplane.spec import dump, load_gpus

    if a["model"] is None:
        fail("give --model (--inventory plans a model on an inventory)")
    if a["gpus"] is not None:
        fail("--inventory: the inventory gives the GPUs; leave --gpus out (--rate R: the cheapest subset "
             "that meets it; --rates R1,R2,...: that per rate, and each kind alone)")
    if a["rate"] is not None and a["rates"] is not None:
        fail("--inventory: give --rate R or --rates R1,R2,..., not both")
    if a["rates"] is not None and a["out"] is not None:
        fail("--out: writes the plan of one rate; give --rate R, not --rates")
    if (a["runtime"] or "vllm-omni") != "vllm-omni":
        fail("--inventory plans vLLM-Omni's space (--runtime vllm-omni)")
    from omniplane.cli.capacity import parse_rates

    rates = parse_rates(a["rates"]) if a["rates"] is not None else None
    try:
        counts = parse_inventory(a["inventory"], load_gpus())
    except InventoryError as exc:
        fail(str(exc))
    host = a["host_gpus"]
    for kind, n in counts.items():
        if n % host:
            fail(f"--inventory: {kind}:{n} is not whole hosts of --host-gpus {host} (hosts are homogeneous)")
    try:
        prices = load_prices()
        if a["prices"] is not None:
            prices.update(load_prices(a["prices"]))
    except InputError as exc:
        fail(f"--prices: {exc}" if a["prices"] is not None else str(exc))
    bases: dict[str, Any] = {}
    targets = None
    for kind in counts:
        base, _, space = _base_planner(a, kind, targets, workload, parse_mix, "vllm-omni")
        targets = base.targets
        bases[kind] = (base, space)
    if rates is not None:
        from omniplane.cli import inventory_sweep

        inventory_sweep.run(a, bases, counts, prices, rates, host, targets)
        return
    res = search(bases, counts, prices, host_gpus=host, rate=a["rate"], target=a["attainment"],
                 say=lambda s: notice(f"inventory: {s}"))
    model = next(iter(bases.values()))[0].problem.model
    doc = {"inventory": _json(res, model, prices, targets, next(iter(counts)))}
    if a["out"] is not None:
        if res.spec is None or res.pick is None:
            fail("--out: no plan found within the inventory")
        with Outputs() as files:
            files.text(a["out"], dump(_plan_file(res, bases, a["out"])))
            files.commit()
    if a["json_out"]:
        print_json(doc)
        return
    _print(doc["inventory"], a["out"])


def _plan_file(res: Any, bases: dict[str, Any], out: Path) -> Any:
    """The pick as ``sim run`` reads it: its latency targets, the runtime that priced it and the
    load it was simulated under (the first kind's workload, relative to the plan file)."""
    from omniplane.plan.runtime import label
    from omniplane.spec import Prediction, workload_ref

    base, space = next(iter(bases.values()))
    pick = res.pick
    pred = Prediction.model_validate({
        "workload": workload_ref(base.problem.workload, out.parent.absolute()),
        "mix": {t: float(f) for t, f in base.problem.mix.items()},
        "offered_rps": round(pick.simulated_at, 6), "requests": base.options.sim_requests,
        "seed": base.options.seed, "goodput_rps": {"total": round(pick.goodput or 0.0, 4)}})
    meta = {**res.spec.meta, "runtime": {**label(base.problem.model, "vllm-omni", space),
                                         "priced_with": base.cost.runtime.name}}
    return res.spec.model_copy(update={"slo": base.targets, "prediction": pred, "meta": meta})


def _json(res: Any, model: Any, prices: Any, targets: Any, first: str) -> dict[str, Any]:
    from omniplane.plan.inventory import HEURISTIC
    from omniplane.plan.inventory_minimal import RULE as MIN_RULE
    from omniplane.plan.prices import ATTRIBUTION

    def cand(c: Any) -> dict[str, Any]:
        return {"plan": c.describe(model), "gpus": c.gpus_by_kind(), "flow_rps": round(c.flow_rps, 3),
                "cost_per_hour": None if c.hourly is None else round(c.hourly, 2),
                "goodput_rps": None if c.goodput is None else round(c.goodput, 3),
                "simulated_at_rps": None if c.simulated_at is None else round(c.simulated_at, 3),
                "attainment": {t: round(v, 4) for t, v in c.attainment.items()},
                "cost_per_1k_requests": {t: None if v is None else round(v, 4)
                                         for t, v in res.cost_per_1k(c).items()},
                "bound": dict(zip(("gpu", "stage"), c.bound(model, res.counts), strict=True))}

    def single(s: Any) -> dict[str, Any]:
        return {"gpu": s.kind, "gpus": s.gpus, "cost_per_hour": round(s.hourly, 2),
                "goodput_rps": None if s.goodput is None else round(s.goodput, 3),
                "simulated_at_rps": None if s.simulated_at is None else round(s.simulated_at, 3),
                "attainment": {t: round(v, 4) for t, v in s.attainment.items()},
                "plan": _describe(s.plan), "note": s.note}

    return {
        "counts": res.counts, "host_gpus": res.host_gpus, "rate": res.rate, "attainment_target": res.target,
        "objective": "cheapest subset meeting the rate" if res.rate is not None else "most goodput",
        "heuristic": HEURISTIC, "candidates_fit": res.found, "simulated": [cand(c) for c in res.tried],
        "pick": cand(res.pick) if res.pick is not None else None,
        "stage_gpu_seconds": {s: {k: None if v is None else round(v, 5) for k, v in per.items()}
                              for s, per in res.stage_costs(model).items()},
        "one_fewer": [_fewer(r, model) for r in res.one_fewer], "gpus_dropped_by_descent": res.dropped,
        "minimality": MIN_RULE if res.rate is not None else None,
        "single_kind": [single(s) for s in res.singles],
        "trimmed": cand(res.trimmed) if res.trimmed is not None else None,
        "trimmed_single_kind": [single(s) for s in res.trimmed_singles],
        "mixing_pays": res.pays, "why": res.why,
        "prices": {k: {"usd_per_gpu_hour": p.usd_per_gpu_hour, "source": p.source, "date": p.date}
                   for k, p in prices.items() if k in res.counts},
        "cost_attribution": f"each executor group at its kind's price; {ATTRIBUTION}",
        "targets_ms": dict(targets.targets_ms) if targets is not None else {},
        "targets_resolved_on": first, "seconds": round(res.seconds, 2)}


def _fewer(r: Any, model: Any) -> dict[str, Any]:
    """A one-fewer row (omniplane.plan.inventory_minimal.OneFewer)."""
    c = r.cand
    return {"gpu": r.kind, "gpus": r.gpus, "plan": None if c is None else c.describe(model),
            "used": None if c is None else c.gpus_by_kind(),
            "cost_per_hour": None if c is None or c.hourly is None else round(c.hourly, 2),
            "simulated_at_rps": None if c is None or c.simulated_at is None else round(c.simulated_at, 3),
            "attainment": {t: round(v, 4) for t, v in r.attainment.items()}, "misses": r.misses,
            "reason": r.reason}


def _describe(spec: Any) -> str | None:
    if spec is None:
        return None
    from omniplane.plan.emit import describe

    return str(describe(spec))


def _print(inv: dict[str, Any], out: Path | None) -> None:
    counts = ", ".join(f"{n} x {k}" for k, n in inv["counts"].items())
    table = Table(title=f"inventory {counts} (hosts of {inv['host_gpus']}): {inv['objective']}")
    for col in ("plan", "GPUs", "$/h", "goodput req/s", "at req/s", "bound by"):
        table.add_column(col, justify="left" if col in ("plan", "bound by", "GPUs") else "right")

    def fmt(v: Any, f: str = ".2f") -> str:
        return "-" if v is None else format(v, f)

    for c in inv["simulated"]:
        table.add_row(c["plan"], ", ".join(f"{n} {k}" for k, n in c["gpus"].items()), fmt(c["cost_per_hour"]),
                      fmt(c["goodput_rps"]), fmt(c["simulated_at_rps"]), f"{c['bound']['stage']} on "
                      f"{c['bound']['gpu']}")
    c = inv["pick"]
    if c and c["plan"] not in {x["plan"] for x in inv["simulated"]}:  # descended
        table.add_row("descended: " + c["plan"], ", ".join(f"{n} {k}" for k, n in c["gpus"].items()),
                      fmt(c["cost_per_hour"]), fmt(c["goodput_rps"]), fmt(c["simulated_at_rps"]),
                      f"{c['bound']['stage']} on {c['bound']['gpu']}")
    c = inv["trimmed"]
    if c:  # the pick without the replicas its flow leaves idle
        table.add_row("trimmed: " + c["plan"], ", ".join(f"{n} {k}" for k, n in c["gpus"].items()),
                      fmt(c["cost_per_hour"]), fmt(c["goodput_rps"]), fmt(c["simulated_at_rps"]),
                      f"{c['bound']['stage']} on {c['bound']['gpu']}")
    for s in inv["single_kind"] + inv["trimmed_single_kind"]:
        table.add_row(f"{s['gpu']} alone: {s['plan'] or s['note']}", f"{s['gpus']} {s['gpu']}",
                      fmt(s["cost_per_hour"]), fmt(s["goodput_rps"]), fmt(s["simulated_at_rps"]), "")
    print_table(table)
    _print_fewer(inv)
    pick = inv["pick"]
    console.print(f"pick: {pick['plan'] if pick else 'none'}", highlight=False)
    console.print(inv["why"], highlight=False)
    console.print(f"sizing: {inv['heuristic']} (a heuristic)", highlight=False)
    console.print(f"latency targets resolved on {inv['targets_resolved_on']}, used for every plan",
                  highlight=False)
    if out is not None:
        console.print(f"wrote {out}", highlight=False)


def _print_fewer(inv: dict[str, Any]) -> None:
    """The evidence of minimality at a rate: the pick with one GPU fewer of each kind."""
    if not inv["one_fewer"]:
        return
    table = Table(title=f"one GPU fewer, simulated at {inv['rate']:g} req/s on the same requests")
    for col in ("fewer", "GPUs", "plan", "misses", "attainment", "note"):
        table.add_column(col)
    for r in inv["one_fewer"]:
        att = r["attainment"].get(r["misses"]) if r["misses"] else None
        table.add_row(r["gpu"], ", ".join(f"{n} {k}" for k, n in (r["used"] or r["gpus"]).items()),
                      r["plan"] or "-", r["misses"] or "-", "-" if att is None else f"{att:.0%}", r["reason"])
    print_table(table)
    dropped = inv["gpus_dropped_by_descent"]
    console.print(f"minimality: {inv['minimality']}" + (f"; the descent dropped {dropped} GPU(s) from the "
                                                         "first candidate that met" if dropped else ""),
                  highlight=False)
