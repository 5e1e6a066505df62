"""``omniplane sim ...``: run the simulator; check it against queueing theory."""

from __future__ import annotations

from typing import Annotated

import typer

from omniplane.cli.output import console, fail, print_json
from omniplane.cli.slo import SloOpt, slo_choice
from omniplane.sim.queueing import check_queue

app = typer.Typer(help="Request-level simulator.", no_args_is_help=True)


@app.command("queue")
def queue(
    kind: Annotated[str, typer.Option(help="mm1, md1 or mmc.")] = "mm1",
    rho: Annotated[float, typer.Option(help="Utilisation in (0, 1).")] = 0.8,
    servers: Annotated[int, typer.Option(help="Servers for mmc.")] = 4,
    customers: Annotated[int, typer.Option(help="Customers per replication.")] = 200_000,
    replications: Annotated[int, typer.Option(help="Independent replications (>= 2).")] = 10,
    seed: Annotated[int, typer.Option(help="Seed of the first replication.")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Simulated vs closed-form mean waiting time for M/M/1, M/D/1 or M/M/c."""
    if kind not in ("mm1", "md1", "mmc"):
        fail(f"--kind must be mm1, md1 or mmc (got {kind!r})")
    if not 0 < rho < 1:
        fail(f"--rho must be in (0, 1) (got {rho})")
    if customers < 100 or replications < 2 or servers < 1:
        fail("need --customers >= 100, --replications >= 2 and --servers >= 1")
    res = check_queue(kind, rho, servers=servers, customers=customers,  # type: ignore[arg-type]
                      replications=replications, seed=seed)
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
    plan: Annotated[str, typer.Argument(help="Plan file (kind: plan).")],
    workload: Annotated[str | None, typer.Option(
        help="Workload file or catalog name (default: the plan file's prediction.workload).")] = None,
    n: Annotated[int | None, typer.Option(help="Number of requests.")] = None,
    duration: Annotated[float | None, typer.Option(
        help="Seconds of arrivals (default: the workload's).")] = None,
    rate: Annotated[float | None, typer.Option(
        help="Arrival rate, req/s (default: the plan's offered rate on its workload, "
             "else the workload's).")] = None,
    seed: Annotated[int, typer.Option(help="Seed for arrivals, sizes and routing.")] = 0,
    slo: SloOpt = None,
    trace: Annotated[str | None, typer.Option(help="Write a Chrome trace (JSON) here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Simulate a workload on a plan: per-type latency, TPOT, SLO attainment, goodput.

    With no options the plan file says everything: its workload and type mix, the offered rate
    and the latency targets it was planned for (``prediction`` and ``slo``); the output compares
    the simulated goodput with the plan's own prediction."""
    from pathlib import Path

    from omniplane.perf import CostModel
    from omniplane.plan.slo import command_targets, plan_budget
    from omniplane.sim import RunSetup, simulate
    from omniplane.sim.trace import write_chrome_trace
    from omniplane.spec import SpecError, load_plan, plan_load
    from omniplane.workload import generate

    try:
        rplan = load_plan(plan)
        load = plan_load(rplan, workload)
    except (SpecError, OSError) as exc:
        fail(str(exc))
    wl, mix, pred = load.workload, load.mix, rplan.spec.prediction
    if wl.model.name != rplan.model.name:
        fail(f"the workload is for model {wl.model.name!r} but the plan is for {rplan.model.name!r}")
    rate = rate if rate is not None else load.rate
    if n is None and duration is None:
        duration = wl.spec.duration_s or 600.0
    cost = CostModel(rplan.model)
    try:
        targets, source = command_targets(slo_choice(slo, rplan.model.type_names), wl, stored=rplan.spec.slo,
                                          gpu=rplan.gpu, gpus=plan_budget(rplan), cost=cost)
    except ValueError as exc:
        fail(str(exc))
    requests = generate(wl, n=n, duration_s=duration, rate=rate, seed=seed, mix=mix)
    setup = RunSetup(trace=trace is not None)
    result = simulate(rplan, requests, cost, slo_s=targets.seconds, seed=seed, setup=setup)
    if trace:
        write_chrome_trace(result, Path(trace))
    data = result.to_json()
    per_type = {t: m.goodput for t, m in result.per_type.items()}
    data["goodput"] = {"total": result.goodput, "per_type": per_type}
    data.update({"slo_ms": dict(targets.targets_ms), "slo_source": source, "workload": wl.spec.name,
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
    console.print(table)
    console.print(f"targets: {source}", highlight=False)
    if "prediction" in data and data["prediction"]["difference"] is not None:
        p = data["prediction"]
        console.print(f"the plan predicted {p['goodput_total']:.3f} req/s at {p['offered_rps']:.3f} req/s "
                      f"({p['requests']} requests): {p['difference']:+.1%}", highlight=False)
