"""``omniplane sim ...``: run the simulator; check it against queueing theory."""

from __future__ import annotations

from typing import Annotated

import typer

from omniplane.cli.output import console, fail, print_json
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
