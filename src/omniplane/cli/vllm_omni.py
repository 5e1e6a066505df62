"""``omniplane vllm-omni config``: a vLLM-Omni stage config running omniplane's scheduler."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from omniplane.cli.output import console, fail, print_json
from omniplane.spec import SpecError, catalog_gpus_path, find_catalog_model, load_gpus

app = typer.Typer(
    help="vLLM-Omni integration: stage configs with omniplane's scheduler.", no_args_is_help=True
)


@app.command("config")
def config(
    model: Annotated[
        str, typer.Option(help="Catalog model (its stock vLLM-Omni layout is the start).")
    ],
    slo_table: Annotated[Path, typer.Option("--slo-table", help="SLO table (YAML/JSON, docs/vllm.md).")],
    gpu: Annotated[
        str | None,
        typer.Option(help="GPU kind (catalog name/alias): SM ladder and omniplane's worker classes."),
    ] = None,
    policy: Annotated[
        str, typer.Option(help="Shared-stage policy: fcfs, horizon, import:MODULE:NAME.")
    ] = "fcfs",
    stock: Annotated[
        Path | None, typer.Option(help="Start from this vLLM-Omni deploy YAML instead of the catalog's.")
    ] = None,
    control: Annotated[str, typer.Option(help="Name of the shared-memory control record.")] = "omniplane",
    single_gpu: Annotated[
        bool, typer.Option(help="All stages on device 0, memory fractions scaled to fit.")
    ] = True,
    memory_budget: Annotated[
        float, typer.Option(help="Sum of gpu_memory_utilization with --single-gpu.")
    ] = 0.9,
    out: Annotated[Path | None, typer.Option(help="Write the YAML here (default: stdout).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the config as one JSON document.")] = False,
) -> None:
    """Write a vLLM-Omni deploy YAML (--deploy-config) running omniplane's scheduler."""
    from omniplane.vllm.settings import load_slo_table
    from omniplane.vllm.stage_config import dump_config, omniplane_config, stock_deploy

    if find_catalog_model(model) is None:
        fail(f"--model: unknown catalog model {model!r}")
    try:
        table = load_slo_table(slo_table)
        kind = load_gpus(catalog_gpus_path()).get(gpu) if gpu else None
        layout, base, source = stock_deploy(model, stock)
        cfg = omniplane_config(
            layout,
            base,
            table,
            policy=policy,
            gpu=kind,
            control=control,
            single_gpu=single_gpu,
            memory_budget=memory_budget,
        )
    except KeyError as exc:
        fail(f"--gpu: {exc.args[0]}")
    except (SpecError, ValueError, OSError) as exc:
        fail(str(exc))
    if json_out:
        print_json(cfg)
        return
    header = (
        f"vLLM-Omni deploy config for {model} with omniplane's scheduler (omniplane vllm-omni config).\n"
        f"Serve: vllm serve {layout.hf_id} --omni --deploy-config THIS_FILE\n"
        f"Stock layout: {source}\nSLO table: {slo_table} ({table.source})\n"
        f"GPU: {kind.name + f' ({kind.sms} SMs)' if kind else 'not given: no SM ladder'}; policy: {policy}"
    )
    text = dump_config(cfg, header)
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
        console.print(f"wrote {out}")
