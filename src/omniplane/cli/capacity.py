"""``omniplane plan --rate R`` / ``--rates R1,R2``: capacity planning (omniplane.plan.capacity)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli import options as opt
from omniplane.cli.errors import fail
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, notice, print_json, print_table
from omniplane.errors import InputError, unknown_name

OBJECTIVES = ("gpus", "cost")
RATE_PERCENTILE = 99.0  # --rate-percentile: near the busiest minute of the busiest hour

RateFromOpt = Annotated[str | None, typer.Option(
    "--rate-from", metavar="TRACE", help="Capacity planning at a trace's peak rate (a shipped trace name or "
    "a file): --rate-percentile of the per-minute arrival rate within its busiest hour (a heuristic).")]
RatePercentileOpt = Annotated[float, opt.float_opt(
    "--rate-percentile", help="With --rate-from: the percentile of the busiest hour's minutes (99: "
    "near its busiest minute, as a queue that is over capacity for a minute misses targets).", lo=0,
    hi=100, lo_open=True, metavar="P")]


def parse_kinds(text: str) -> list[str]:
    """``--gpu A100-80GB,H100``: catalog names, in order, each once."""
    from omniplane.spec import load_gpus

    catalog = load_gpus()
    out: list[str] = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        try:
            name = catalog.get(item).name
        except KeyError:
            fail(f"--gpu: {unknown_name('GPU kind', item, catalog.names(), '; aliases: omniplane gpus')}")
        if name in out:
            fail(f"--gpu: {name} given twice")
        out.append(name)
    if not out:
        fail("--gpu: give at least one GPU kind")
    return out


def parse_rates(text: str) -> list[float]:
    out: list[float] = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        try:
            r = float(item)
        except ValueError:
            fail(f"--rates: {item!r} is not a number; expected rates in req/s, e.g. 2,5,10,20")
        if not 0 < r <= 1e6:
            fail(f"--rates: {item!r} must be a rate > 0 req/s")
        out.append(r)
    if not out:
        fail("--rates: give at least one rate, e.g. 2,5,10,20")
    return sorted(set(out))


@dataclass
class Request:
    rates: list[float]
    kinds: list[str]
    attainment: float
    objective: str
    prices: Path | None
    out: Path | None
    figures: Path | None
    json_out: bool
    runtime: str = "ideal"  # the plan space searched (omniplane.plan.runtime)
    rate_from: dict[str, Any] | None = None  # --rate-from: the trace, its busiest hour and the rate


def run(req: Request, make_base: Any) -> None:
    """``make_base(kind, targets)`` -> (Planner, workload, space): one base planner per GPU kind
    (its cost table the runtime's) and the runtime's plan space; the latency targets are resolved
    on the first kind and used for every kind (one bar)."""
    from omniplane.plan.capacity import CapacityPlanner
    from omniplane.plan.prices import ATTRIBUTION, costs, load_prices
    from omniplane.plan.runtime import targets_space as runtime_targets_space

    try:
        prices = load_prices()
        if req.prices is not None:
            prices.update(load_prices(req.prices))
    except InputError as exc:
        fail(f"--prices: {exc}" if req.prices is not None else str(exc))
    t_all = time.perf_counter()
    bases: dict[str, Any] = {}
    targets = None
    for kind in req.kinds:
        base, wl, space = make_base(kind, targets)
        targets = base.targets
        bases[kind] = (base, wl, space)
    targets_space = runtime_targets_space(req.runtime, bases[req.kinds[0]][2])
    rows: list[dict[str, Any]] = []
    chosen: dict[float, tuple[dict[str, Any], Any]] = {}
    for rate in req.rates:
        found: list[tuple[dict[str, Any], Any]] = []
        for kind in req.kinds:
            base, _, space = bases[kind]
            t0 = time.perf_counter()
            say = _say(kind, rate)
            cap = CapacityPlanner(base, rate, req.attainment, progress=say, space=space).run()
            row = _row(cap, prices.get(kind), base.problem.mix, costs, time.perf_counter() - t0)
            rows.append(row)
            found.append((row, cap))
        ok = [f for f in found if f[0]["gpus"] is not None]
        if ok:
            if req.objective == "cost":
                priced = [f for f in ok if f[0]["cost_per_hour"] is not None]
                if not priced:
                    fail("--objective cost: no GPU kind asked has a price; give them with --prices FILE")
                chosen[rate] = min(priced, key=lambda f: (f[0]["cost_per_hour"], f[0]["gpus"]))
            else:
                chosen[rate] = min(ok, key=lambda f: f[0]["gpus"])
    written = _write(req, chosen, bases, rows, targets_space)
    doc: dict[str, Any] = {
        "attainment_target": req.attainment, "objective": req.objective,
        "targets_ms": dict(targets.targets_ms) if targets is not None else {},
        "targets_resolved_on": req.kinds[0],
        "targets_space": targets_space,
        "cost_attribution": ATTRIBUTION,
        "prices": {k: {"usd_per_gpu_hour": p.usd_per_gpu_hour, "source": p.source, "date": p.date}
                   for k, p in prices.items() if k in req.kinds},
        "runtime": req.runtime, "rows": rows, "seconds": round(time.perf_counter() - t_all, 2)}
    if req.rate_from is not None:
        doc["rate_from"] = req.rate_from
    if len(req.rates) == 1:
        pick = chosen.get(req.rates[0])
        doc["capacity"] = _capacity_json(pick[0]) if pick else None
    else:
        doc["sweep"] = [{"rate": r, "chosen_gpu": c[0]["gpu"], "gpus": c[0]["gpus"],
                         "cost_per_hour": c[0]["cost_per_hour"]} for r, (c) in chosen.items()]
    if req.json_out:
        print_json(doc)
        return
    _print(req, doc, chosen, written)


def _say(kind: str, rate: float) -> Any:
    return lambda s: notice(f"capacity {kind} @ {rate:g}/s: {s}")


def _row(cap: Any, price: Any, mix: Any, costs: Any, seconds: float) -> dict[str, Any]:
    used = cap.gpus_used
    hourly, per = costs(price, used, cap.rate, mix, cap.gpu_seconds) if used is not None else (None, {})
    fewer = cap.one_fewer
    return {
        "rate": cap.rate, "gpu": cap.gpu, "gpus": cap.gpus, "gpus_used": used,
        "none_found": None if cap.gpus is not None else _none_found(cap.probes),
        "cost_per_hour": None if hourly is None else round(hourly, 2),
        "cost_per_1k_requests": {t: None if v is None else round(v, 4) for t, v in per.items()},
        "attainment": {t: round(a, 4) for t, a in cap.attainment.items()},
        "headroom_rps": None if cap.headroom_rps is None else round(cap.headroom_rps, 3),
        "headroom": cap.headroom_note,
        "one_fewer": None if fewer is None else {
            "gpus": fewer.gpus, "attainment": {t: round(a, 4) for t, a in fewer.attainment.items()},
            "misses": fewer.worst() if not fewer.meets else None, "why": fewer.why},
        "lower_bound": {"gpus": cap.lower, "rule": "flow relaxation: R x sum_t pi_t W_t GPUs, and the fewest "
                                                   "GPUs of any plan (omniplane.plan.capacity)"},
        "probes": [p.to_json() for p in cap.probes],
        "plan": _describe(cap.plan), "seconds": round(seconds, 2), "cpu_seconds": round(cap.cpu_seconds, 2),
        "_plan": cap.plan,
    }


def _none_found(probes: list[Any]) -> dict[str, Any] | None:
    """Why no count met the target: the probe that came closest (its worst type the highest) and
    that type's attainment there; None when no probe had a plan."""
    tried = [p for p in probes if p.attainment]
    if not tried:
        return None
    best = max(tried, key=lambda p: (p.attainment[p.worst()], -p.gpus))
    worst = best.worst()
    return {"closest_gpus": best.gpus, "type": worst, "attainment": round(best.attainment[worst], 4),
            "largest_gpus_tried": max(p.gpus for p in probes)}


def _capacity_json(row: dict[str, Any]) -> dict[str, Any]:
    keep = ("rate", "gpu", "gpus", "gpus_used", "none_found", "cost_per_hour", "cost_per_1k_requests",
            "attainment", "headroom_rps", "headroom", "one_fewer", "lower_bound", "probes", "plan", "seconds",
            "cpu_seconds")
    return {k: row[k] for k in keep}


def _describe(spec: Any) -> str | None:
    if spec is None:
        return None
    from omniplane.plan.emit import describe

    return describe(spec)


def _write(req: Request, chosen: dict[float, Any], bases: dict[str, Any],
           rows: list[dict[str, Any]], targets_space: str) -> list[Path]:
    from omniplane.plan.runtime import label
    from omniplane.spec import dump, workload_ref

    written: list[Path] = []
    with Outputs() as files:
        if req.out is not None:
            if len(req.rates) != 1 or req.rates[0] not in chosen:
                fail("--out: writes the chosen plan of one rate; give --rate R (a count that meets it was "
                     "not found)" if len(req.rates) == 1 else "--out: give one --rate, not --rates")
            row = chosen[req.rates[0]][0]
            spec = row["_plan"]
            base, wl, space = bases[row["gpu"]]
            ref = workload_ref(wl, req.out.parent.absolute())
            pred = spec.prediction.model_copy(update={"workload": ref})
            meta = {**(spec.meta or {}), "runtime": {**label(base.problem.model, req.runtime, space),
                                                      "priced_with": base.cost.runtime.name,
                                                      "targets_space": targets_space}}
            spec = spec.model_copy(update={"prediction": pred, "meta": meta})
            files.text(req.out, dump(spec))
            written.append(req.out)
        if req.figures is not None and len(req.rates) > 1:
            from omniplane.repro.capacity_figure import write_sweep

            written.append(write_sweep([{k: v for k, v in r.items() if k != "_plan"} for r in rows],
                                       files.folder(req.figures)))
        files.commit()
    for r in rows:
        r.pop("_plan", None)
    return written


def _print(req: Request, doc: dict[str, Any], chosen: dict[float, Any], written: list[Path]) -> None:
    if req.rate_from is not None:
        console.print(rate_from_line(req.rate_from), highlight=False)
    table = Table(title=f"capacity: every type at >= {req.attainment:.0%} attainment (simulated at the rate; "
                        f"{req.runtime} plan space)")
    for col in ("rate", "GPU", "GPUs", "$/h", "headroom", "N-1 misses", "plan", "s"):
        table.add_column(col, justify="right" if col not in ("GPU", "plan") else "left")
    for r in doc["rows"]:
        fewer = r["one_fewer"] or {}
        miss = fewer.get("misses")
        att = fewer.get("attainment", {})
        table.add_row(f"{r['rate']:g}", r["gpu"], "-" if r["gpus"] is None else str(r["gpus"]),
                      "-" if r["cost_per_hour"] is None else f"{r['cost_per_hour']:.2f}",
                      "-" if r["headroom_rps"] is None else f"{r['headroom_rps']:.2f}",
                      f"{miss} {att.get(miss, 0):.2f}" if miss else "-", r["plan"] or "none found",
                      f"{r['seconds']:.0f}")
    print_table(table)
    for r in doc["rows"]:
        if r["gpus"] is not None and any(v is not None for v in r["cost_per_1k_requests"].values()):
            console.print(f"{r['gpu']} @ {r['rate']:g}/s, $ per 1k requests: " + ", ".join(
                f"{t} {v:.3f}" for t, v in r["cost_per_1k_requests"].items() if v is not None),
                highlight=False)
    for k, p in doc["prices"].items():
        console.print(f"price {k}: ${p['usd_per_gpu_hour']:.2f}/GPU-h ({p['source']}, {p['date']})",
                      highlight=False)
    console.print(f"cost per type: {doc['cost_attribution']}", highlight=False)
    console.print(f"latency targets resolved on {doc['targets_resolved_on']} in the {doc['targets_space']} "
                  "space, used for every kind",
                  highlight=False)
    for r in doc["rows"]:
        why = r.get("none_found")
        if r["gpus"] is None and why:
            target = doc["targets_ms"].get(why["type"])
            console.print(
                f"{r['gpu']} @ {r['rate']:g}/s: no count up to {why['largest_gpus_tried']} GPUs meets "
                f"{req.attainment:.0%}; closest: {why['closest_gpus']} GPUs, where {why['type']} reaches "
                f"{why['attainment']:.0%} of its {target:.0f} ms target. A target near the type's own solo "
                "latency cannot be met by that share at any size (more GPUs do not make a request faster); "
                "give looser targets, e.g. --slo '5x solo p95'", highlight=False)
    for rate, (row, _) in chosen.items():
        console.print(f"at {rate:g} req/s: {row['gpus']} x {row['gpu']} (objective: {req.objective})",
                      highlight=False)
    for p in written:
        console.print(f"wrote {p}", highlight=False)


def gpu_kinds(value: object) -> str:
    kind = opt.GpuKind()
    return ",".join(kind(x) for x in str(value).split(",") if x.strip())


def from_plan(a: dict[str, Any], workload: Any, parse_mix: Any) -> None:
    """--rate/--rates/--rate-from: omniplane.cli.capacity, one base planner per GPU kind."""
    if a["rate_from"] is None and a["rate_percentile"] != RATE_PERCENTILE:
        fail("--rate-percentile goes with --rate-from TRACE")
    if sum(a[k] is not None for k in ("rate", "rates", "rate_from")) > 1:
        fail("give one of --rate R, --rates R1,R2,... or --rate-from TRACE, not several")
    if a["model"] is None:
        fail("give --model (capacity planning: --model M --rate R --gpu KINDS)")
    if a["gpus"] is not None:
        fail("--gpus: capacity planning (--rate/--rates) finds the GPU count; leave --gpus out")
    if a["replan_gpus"] is not None or a["replan_mix"] is not None or a["sweep"]:
        fail("--replan-gpus, --replan-mix and --sweep are not for capacity planning (--rate/--rates)")
    from omniplane.plan.runtime import default_runtime
    from omniplane.spec import find_catalog_model, load_model

    m = load_model(find_catalog_model(a["model"]) or Path(a["model"]))
    peak = trace_rate(a["rate_from"], a["rate_percentile"], a["seed"]) if a["rate_from"] is not None else None
    rates = [a["rate"]] if a["rate"] is not None else [peak["rate"]] if peak else parse_rates(a["rates"])
    req = Request(rates, parse_kinds(a["gpu"]), a["attainment"], a["objective"], a["prices"], a["out"],
                  a["figures"], a["json_out"], a["runtime"] or default_runtime(m), peak)
    run(req, lambda kind, targets: _base_planner(a, kind, targets, workload, parse_mix, req.runtime))


def trace_rate(ref: str, percentile: float, seed: int) -> dict[str, Any]:
    """``--rate-from``: the trace's busiest-hour rate (omniplane.workload.peak) as ``rate_from``
    JSON; a ServeGen folder is one seeded 24-hour realisation (``seed``)."""
    from omniplane.workload import load_trace, resolve_trace
    from omniplane.workload.peak import peak_rate

    try:
        path, fmt = resolve_trace(ref)
        trace = load_trace(path, fmt, seed=seed)
        peak = peak_rate(trace.arrival, percentile, source=str(path))
    except FileNotFoundError as exc:
        fail(f"--rate-from: {exc.args[0] if exc.args else exc}")
    except InputError as exc:
        fail(f"--rate-from: {exc} (expected a trace: azure, mooncake, servegen, or a CSV / "
             "JSONL with arrival_s; docs/reference/workloads.md)")
    if not peak.rate > 0:
        fail(f"--rate-from {ref}: the {percentile:g}th percentile of its busiest hour's minutes is 0 req/s; "
             "give a higher --rate-percentile")
    return {"trace": ref, "format": fmt, **peak.to_json()}


def rate_from_line(p: dict[str, Any]) -> str:
    span = "whole trace (under an hour)" if p["whole_trace"] else "busiest hour"
    return (f"rate from {p['trace']}: {span} {p['hour_start_s']:.0f}-{p['hour_end_s']:.0f} s "
            f"({p['window_s']:.0f} s, {p['arrivals']} arrivals); p{p['percentile']:g} of its "
            f"{p['bin_s']:.0f}-s rates: {p['rate']:g} req/s (a heuristic; docs/guides/plan.md)")


def _base_planner(a: dict[str, Any], kind_name: str, targets: Any, workload: Any,
                  parse_mix: Any, runtime: str) -> tuple[Any, Any, Any]:
    """``workload``, ``parse_mix``: omniplane.cli.plan's (a workload file by model; --mix);
    ``runtime``: the plan space (omniplane.plan.runtime.setup; targets resolved in that space
    as ``omniplane plan`` does, slo.resolve.space_targets)."""
    from omniplane.cli.slo import slo_choice
    from omniplane.perf import CostModel
    from omniplane.plan.costs import CostTable
    from omniplane.plan.options import PlannerOptions
    from omniplane.plan.pipeline import Planner
    from omniplane.plan.problem import make_problem
    from omniplane.plan.runtime import RuntimeUnavailable, pricing_runtime, setup
    from omniplane.slo.resolve import space_targets
    from omniplane.spec import find_catalog_model, load_gpus, load_model, load_workload

    m = load_model(find_catalog_model(a["model"]) or Path(a["model"]))
    wl = load_workload(workload(m.name, a["workload"]))
    if wl.model.name != m.name:
        fail(f"--workload {a['workload']!r} is for model {wl.model.name!r}, not {m.name!r}")
    mix = parse_mix(a["mix"], m.type_names, a["normalize"]) if a["mix"] else None
    options = PlannerOptions(k_c=a["k_c"], k_s=a["k_s"], routing_step=a["routing_step"],
                             mc_samples=a["mc_samples"],
                             mc_tolerance=a["mc_tolerance"], sim_requests=a["sim_requests"],
                             max_simulated=a["max_simulated"], mc_budget=a["mc_budget"] or None,
                             time_budget_s=a["time_budget"], seed=a["seed"])
    problem = make_problem(wl, load_gpus().get(kind_name), 8, samples=options.mc_samples, seed=a["seed"],
                           mix=mix)
    cost = CostModel(problem.model, runtime=pricing_runtime(runtime))  # as omniplane plan prices it
    table = CostTable(problem, cost)
    try:
        rt = setup(runtime, problem, cost, table, options.k_s, a["seed"])
    except RuntimeUnavailable as exc:
        fail(str(exc))
    if targets is None:
        choice = slo_choice(a["slo"], m.type_names, None, "--slo")
        if choice is not None and choice.base == "plan":
            fail("--slo plan: planning writes a plan's targets; give a policy or TYPE=DURATION items")
        base = choice.base if choice is not None else None
        given = None if base is None or isinstance(base, str) else base
        overrides = dict(choice.targets_ms) if choice is not None else None
        targets = space_targets(rt, given or wl.spec.slo, overrides, seed=options.seed)
    return Planner(problem, options=options, cost=cost, table=rt.table, targets=targets), wl, rt.space
