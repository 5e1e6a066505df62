"""``omniplane sim ...``: run the simulator; check it against queueing theory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from omniplane.cli import options as opt
from omniplane.cli.errors import fail, new_app
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, notice, print_json, print_table
from omniplane.cli.progress import StderrProgress
from omniplane.cli.slo import SloOpt, slo_choice

app = new_app("Request-level simulator.")
LONG_RUN = 20_000  # requests: a simulation this long says on stderr that it started
LONG_QUEUE = 1_000_000  # customers in all: `sim queue` shows progress from here (measured: 5 x 10^6 M/M/1
# customers took 3.5 min on a busy 2-core machine, so a million is tens of seconds of silence)


@app.command("queue")
def queue(
    kind: Annotated[str, opt.choice_opt("--kind", help="Queue.", choices=("mm1", "md1", "mmc"),
                                        what="queue kind")] = "mm1",
    rho: Annotated[float, opt.float_opt("--rho", help="Utilisation.", lo=0, hi=1, lo_open=True,
                                        hi_open=True)] = 0.8,
    servers: Annotated[int, opt.int_opt("--servers", help="Servers for mmc.", lo=1, hi=1024)] = 4,
    customers: Annotated[int, opt.int_opt("--customers", help="Customers per replication.", lo=100,
                                          hi=10_000_000)] = 200_000,
    replications: Annotated[int, opt.int_opt("--replications", help="Independent replications.", lo=2,
                                             hi=1000)] = 10,
    seed: Annotated[int, opt.seed_opt("Seed of the first replication.")] = 0,
    json_out: Annotated[bool, opt.json_opt()] = False,
) -> None:
    """Simulated vs closed-form mean waiting time for M/M/1, M/D/1 or M/M/c."""
    from omniplane.sim.queueing import check_queue

    if customers * replications > 20_000_000:
        fail("--customers x --replications must be at most 20,000,000 "
             f"(got {customers:,} x {replications:,})")
    bar = StderrProgress("sim queue")
    long_run = customers * replications >= LONG_QUEUE
    if long_run:  # a long simulation is never silent
        bar.start(f"replications of {customers:,} customers", replications)
    res = check_queue(kind, rho, servers=servers, customers=customers,  # type: ignore[arg-type]
                      replications=replications, seed=seed,
                      progress=(lambda: bar.advance(1)) if long_run else None)
    if long_run:
        bar.end()
    if json_out:
        print_json(res.to_json())
        return
    d = res.to_json()
    console.print(
        f"{kind} rho={rho} servers={d['servers']}: simulated Wq = {d['simulated_mean_wait']:.4f} "
        f"± {d['ci95_half_width']:.4f} (95% CI, {replications} x {customers} customers), "
        f"closed form {d['closed_form_mean_wait']:.4f} -> "
        f"{'inside' if d['contains_closed_form'] else 'OUTSIDE'} the interval; "
        f"{d['events_per_s']:.0f} events/s"
    )


@app.command("run")
def run(
    plan: Annotated[Path, opt.argument("Plan file (kind: plan).", opt.InputPath(), "PLAN")],
    workload: Annotated[str | None, opt.workload_opt(
        help="Workload file or catalog name (default: the plan file's prediction.workload).")] = None,
    n: Annotated[int | None, opt.n_opt()] = None,
    duration: Annotated[float | None, opt.duration_opt(help="Seconds of arrivals (default: the workload's).")
                        ] = None,
    rate: Annotated[float | None, opt.rate_opt(
        help="Arrival rate, req/s (default: the plan's offered rate on its workload, else the "
             "workload's).")] = None,
    seed: Annotated[int, opt.seed_opt("Seed for arrivals, sizes and routing.")] = 0,
    slo: SloOpt = None,
    trace: Annotated[Path | None, opt.out_opt("--trace", help="Write a Chrome trace (JSON) here.")] = None,
    json_out: Annotated[bool, opt.json_opt()] = False,
) -> None:
    """Simulate a workload on a plan: per-type latency, TPOT, SLO attainment, goodput.

    With no options the plan file says everything: its workload and type mix, the offered rate
    and the latency targets it was planned for (``prediction`` and ``slo``); the output compares
    the simulated goodput with the plan's own prediction."""
    from omniplane.perf import CostModel
    from omniplane.perf.runtime import plan_pricing
    from omniplane.sim import RunSetup, simulate
    from omniplane.sim.trace import write_chrome_trace
    from omniplane.slo.resolve import command_targets, plan_budget, plan_runtime
    from omniplane.spec import load_plan, plan_load
    from omniplane.workload import generate

    rplan = load_plan(plan)
    load = plan_load(rplan, workload)
    wl, mix, pred = load.workload, load.mix, rplan.spec.prediction
    if wl.model.name != rplan.model.name:
        fail(f"--workload: the workload is for model {wl.model.name!r} but the plan is for "
             f"{rplan.model.name!r}")
    rate = rate if rate is not None else load.rate
    if n is None and duration is None:
        duration = wl.spec.duration_s or 600.0
    try:
        cost = CostModel(rplan.model, runtime=plan_pricing(rplan.spec.meta, str(plan)))
    except (KeyError, ValueError) as exc:
        fail(f"{plan}: meta.runtime.priced_with: {exc}")
    try:
        targets, source = command_targets(slo_choice(slo, rplan.model.type_names), wl, stored=rplan.spec.slo,
                                          gpu=rplan.gpu, gpus=plan_budget(rplan), cost=cost,
                                          runtime=plan_runtime(rplan.spec.meta))
    except ValueError as exc:
        fail(str(exc) if str(exc).startswith("--") else f"--slo: {exc}")
    requests = generate(wl, n=n, duration_s=duration, rate=rate, seed=seed, mix=mix)
    if len(requests) >= LONG_RUN:
        notice(f"simulating {len(requests):,} requests on {rplan.spec.name or plan} ...")
    setup = RunSetup(trace=trace is not None)
    result = simulate(rplan, requests, cost, slo_s=targets.seconds, seed=seed, setup=setup)
    if trace is not None:
        with Outputs() as files:
            write_chrome_trace(result, files.path(trace))
            files.commit()
    data = result.to_json()
    per_type = {t: m.goodput for t, m in result.per_type.items()}
    data["goodput"] = {"total": result.goodput, "per_type": per_type}
    data.update({"slo_ms": dict(targets.targets_ms), "slo_source": source, "workload": wl.spec.name,
                 "priced_with": cost.runtime.name,
                 "offered_rps": rate if rate is not None else len(requests) / max(result.window_s, 1e-9),
                 "mix": mix})
    if load.on_plan and pred is not None:
        g = pred.goodput_rps.total
        data["prediction"] = {"goodput_total": g, "offered_rps": pred.offered_rps, "requests": pred.requests,
                              "difference": (result.goodput - g) / g if g > 0 else None}
    if json_out:
        print_json(data)
        return
    from rich.table import Table

    table = Table(title=f"{rplan.spec.name or plan}: {len(requests)} requests, "
                        f"goodput {result.goodput:.3f} req/s")
    for col in ("type", "arrived", "done", "SLO ms", "p50 ms", "p95 ms", "TPOT p50", "attain.", "goodput"):
        table.add_column(col, justify="right", no_wrap=True)
    for t, m in result.per_type.items():
        def f(x: float | None) -> str:
            return "-" if x is None else f"{x:.1f}"
        table.add_row(t, str(m.arrived), str(m.completed), f(data["slo_ms"].get(t)),
                      f(m.latency_ms["p50"]), f(m.latency_ms["p95"]), f(m.tpot_ms["p50"]),
                      "-" if m.attainment is None else f"{m.attainment:.2f}", f"{m.goodput:.3f}")
    print_table(table)
    console.print(f"targets: {source}", highlight=False)
    if "prediction" in data and data["prediction"]["difference"] is not None:
        p = data["prediction"]
        console.print(f"the plan predicted {p['goodput_total']:.3f} req/s at {p['offered_rps']:.3f} req/s "
                      f"({p['requests']} requests): {p['difference']:+.1%}", highlight=False)
