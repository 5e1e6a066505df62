"""The ``omniplane`` command. Every command is registered here, in one place; every command runs
under the one error path of :mod:`omniplane.cli.errors` and takes its options from
:mod:`omniplane.cli.options`."""

from __future__ import annotations

from typing import Annotated

import typer

from omniplane import __version__
from omniplane.cli import (
    calibrate,
    catalog,
    deploy,
    experiment,
    export,
    fidelity,
    perf,
    perf_query,
    plan,
    profile,
    route,
    sim,
    vllm_omni,
    workload,
)
from omniplane.cli.errors import DEBUG_ENV, new_app

app = new_app("Plan and schedule serving of omni / any-to-any multimodal models.", root=True,
              name="omniplane")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"omniplane {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", envvar=DEBUG_ENV,
                           help=f"Show the traceback of an internal error (or set {DEBUG_ENV}=1).")
    ] = False,
) -> None:
    """omniplane: deployment planning and SLO-aware scheduling for omni models.

    Exit status: 0 done; 2 a mistake in the command line or an input file (the message names
    the option or file and what was expected); 70 an internal error (please report it).
    """


app.command("models")(catalog.models)
app.command("gpus")(catalog.gpus)
app.command("show")(catalog.show)
app.command("validate")(catalog.validate)
app.add_typer(sim.app, name="sim")

workload_app = new_app("Inspect workloads and traces; write requests for replay.")
workload_app.command("show")(workload.show)
workload_app.command("plot")(workload.plot)
workload_app.command("sample")(workload.sample)
app.add_typer(workload_app, name="workload")
perf_app = new_app("The performance model: capacity, one call's time, validation, fitting, solo latency.")
perf_app.command("validate")(perf.validate)
perf_app.command("fit")(perf.fit)
perf_app.command("colocation-fit")(perf.colocation_fit)
perf_app.command("solo")(perf.solo)
perf_app.command("capacity")(perf_query.capacity)
perf_app.command("predict")(perf_query.predict)
perf_app.command("bench")(perf_query.bench)
app.add_typer(perf_app, name="perf")
app.command("profile")(profile.profile)
app.add_typer(experiment.app, name="experiment")
app.add_typer(plan.app, name="plan")
app.add_typer(vllm_omni.app, name="vllm-omni")
app.command("calibrate")(calibrate.calibrate)
app.command("deploy")(deploy.deploy)
app.command("loadgen")(deploy.loadgen)
app.command("rehearse")(deploy.rehearse)
app.command("export")(export.export)
app.command("route")(route.route)
app.command("fidelity")(fidelity.fidelity)


def main() -> None:
    app()
