"""``omniplane vllm-omni config``: a vLLM-Omni stage config running omniplane's scheduler."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from omniplane.cli import options as opt
from omniplane.cli.errors import fail, new_app
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, err_console, notice, print_json
from omniplane.sched.factory import ALIASES
from omniplane.spec import find_catalog_model, load_gpus, load_model

app = new_app("vLLM-Omni integration: stage configs with omniplane's scheduler.")


def _policy(value: object) -> str:
    """A policy name the vLLM scheduler class can build (omniplane.vllm.policies)."""
    import importlib.util

    from omniplane.vllm.policies import NAMES

    text = str(value).strip()
    if text in NAMES:
        return text
    if not text.startswith("import:"):
        raise typer.BadParameter(f"unknown policy {text!r}; expected one of {', '.join(NAMES)} or "
                                 "import:MODULE:NAME")
    module, sep, name = text.removeprefix("import:").rpartition(":")
    if not sep or not module or not name.isidentifier():
        raise typer.BadParameter(f"expected import:MODULE:NAME, got {text!r}")
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise typer.BadParameter(f"{text}: no module {module!r} can be imported here")
    return text


# policies whose co-location mode is ``split`` (omniplane.sched.factory): they cap the shared
# stage's SMs, so they need the GPU's SM ladder
SM_POLICIES = ("horizon", "no-rotation", "static-split", "edf-split", "horizon-hide-always")
NO_GPU_REASON = ("no --gpu, so no SM ladder can be made (HorizonServe needs the GPU's SM count and "
                 "compute capability); give --gpu GPU for horizon")


@app.command("config")
def config(
    model: Annotated[str, opt.option(
        "--model", help="Catalog model (its stock vLLM-Omni layout is the start).",
        parser=opt.model_ref(), metavar="MODEL")],
    slo_table: Annotated[Path | None, opt.file_opt(
        "--slo-table", help="SLO table (YAML/JSON, docs/reference/vllm.md); default with --gpu: 5 x solo "
                            "p95 from the performance model (omniplane perf solo).")] = None,
    gpu: Annotated[str | None, opt.gpu_opt(
        "--gpu", help="GPU kind: SM ladder, derived SLO table and omniplane's worker classes.")] = None,
    policy: Annotated[str | None, opt.option(
        "--policy", help="Shared-stage policy: a policy of omniplane.sched.factory (fcfs, horizon, ...) or "
                    "import:MODULE:NAME; default horizon with --gpu, fcfs without.", parser=_policy,
        metavar="POLICY")] = None,
    stock: Annotated[Path | None, opt.file_opt(
        "--stock", help="Start from this vLLM-Omni deploy YAML instead of the catalog's.")] = None,
    control: Annotated[str, typer.Option(metavar="NAME", help="Name of the shared-memory control record.")
                       ] = "omniplane",
    single_gpu: Annotated[
        bool, typer.Option(help="All stages on device 0, memory fractions scaled to fit.")
    ] = True,
    memory_budget: Annotated[float, opt.float_opt(
        "--memory-budget", help="Sum of gpu_memory_utilization with --single-gpu.", lo=0, hi=1,
        lo_open=True)] = 0.9,
    workload: Annotated[str | None, opt.option(
        "--workload", help="Catalog workload or file whose context lengths size the KV caches (default: the "
                           "model's base catalog workload).", parser=opt.workload_ref(), metavar="WORKLOAD")
    ] = None,
    out: Annotated[Path | None, opt.out_opt("--out", help="Write the YAML here (default: stdout).")] = None,
    json_out: Annotated[bool, opt.json_opt("Print the config as one JSON document.")] = False,
) -> None:
    """Write a vLLM-Omni deploy YAML (--deploy-config) running omniplane's scheduler."""
    from omniplane.perf.stage_memory import render
    from omniplane.vllm.settings import load_slo_table
    from omniplane.vllm.stage_config import (
        dump_config,
        omniplane_config,
        size_memory,
        stock_deploy,
        workload_contexts,
    )

    found = find_catalog_model(model)
    if found is None:
        fail(f"--model: {model!r} is not a catalog model (the stock layout comes from the catalog)")
    spec = load_model(found)
    table = load_slo_table(slo_table) if slo_table is not None else None
    kind = load_gpus().get(gpu) if gpu else None
    note = ""
    if policy is None:
        policy = "horizon" if kind is not None else "fcfs"
        if kind is None:
            note = f"not horizon: {NO_GPU_REASON}"
    elif kind is None and ALIASES.get(policy, policy) in SM_POLICIES:
        fail(f"--policy {policy}: {NO_GPU_REASON.replace('give --gpu GPU for horizon', 'give --gpu GPU')}")
    ladder: dict[str, object] | None = None
    if kind is not None:
        from omniplane.perf import CostModel
        from omniplane.vllm.deploy_defaults import model_ladder, solo_slo_table

        cost = CostModel(spec)  # one profile for the ladder and the derived SLO table
        try:
            lad, ladder_source = model_ladder(spec, kind, cost=cost)
            if table is None:
                table = load_slo_table(solo_slo_table(spec, kind, cost=cost))
        except (ValueError, KeyError) as exc:
            fail(f"--gpu {kind.name}: {exc}")
        ladder = {"levels": list(lad.levels), "source": ladder_source}
    try:
        layout, base, source = stock_deploy(model, stock)
        cfg = omniplane_config(
            layout,
            base,
            table,
            policy=policy,
            gpu=kind,
            ladder=ladder,
            control=control,
            single_gpu=single_gpu,
            memory_budget=memory_budget,
        )
        memory = ""
        if kind is not None:  # each device's stages sized from what they load (omniplane.perf.stage_memory)
            ctx, wl_name = workload_contexts(spec, workload)
            sized = size_memory(cfg, layout, spec, kind, ctx)
            memory = (f"\nMemory sized for {kind.name} at the context lengths of workload {wl_name}:\n"
                      + render({f"device {d}": m for d, m in sized.items()}))
    except ValueError as exc:
        hint = (" (--no-single-gpu keeps the stock devices, one per stage group)"
                if single_gpu and "does not fit" in str(exc) else "")
        fail(f"{exc}{hint}")
    if note:
        err_console.print(f"[yellow]policy fcfs, {note}[/]")
    if json_out:
        if memory:  # stdout stays the one deploy document; the sizing goes to stderr
            notice(memory.strip())
        print_json(cfg)
        return
    lines = [
        f"vLLM-Omni deploy config for {model} with omniplane's scheduler (omniplane vllm-omni config).",
        f"Serve: vllm serve {layout.hf_id} --omni --deploy-config THIS_FILE",
        f"Stock layout: {source}",
        (f"SLO table: {slo_table} ({table.source})" if slo_table else f"SLO table: {table.source}")
        if table is not None else
        "SLO table: none (no --slo-table, and no --gpu to derive one): the default classes, no deadlines",
        f"GPU: {kind.name} ({kind.sms} SMs, compute capability {kind.compute_capability})" if kind else
        "GPU: not given: no SM ladder",
    ]
    if ladder is not None:
        lines.append(f"SM ladder {ladder['levels']}: {ladder['source']}")
    lines.append(f"policy: {policy}" + (f" ({note})" if note else ""))
    header = "\n".join(lines) + (
        memory or "\nMemory: not sized (no --gpu): the stock fractions, scaled with --single-gpu")
    text = dump_config(cfg, header)
    if out is None:
        sys.stdout.write(text)
    else:
        with Outputs() as files:
            files.text(out, text)
            files.commit()
        console.print(f"wrote {out}")
