"""``omniplane models``, ``omniplane gpus``, ``omniplane show`` and ``omniplane validate``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.tree import Tree

from omniplane.cli import options as opt
from omniplane.cli.errors import USER_ERROR, print_error
from omniplane.cli.output import console, print_json, print_table
from omniplane.errors import UserError
from omniplane.spec import (
    ModelSpec,
    SpecError,
    TraceArrivals,
    WorkloadSpec,
    catalog_gpus_path,
    catalog_model_paths,
    load_document,
    load_gpus,
    load_model,
    load_workload,
)
from omniplane.spec.catalog import SHIPPED_TRACES

JsonOpt = Annotated[bool, opt.json_opt()]
# kinds of files `validate` reads besides the spec kinds (kind -> loader module:function)
OTHER_KINDS = {"omniplane-slo-table": ("omniplane.vllm.settings", "load_slo_table")}


def model_json(model: ModelSpec, path: Path | None) -> dict[str, Any]:
    return {
        "name": model.name,
        "display_name": model.display_name,
        "path": str(path) if path else None,
        "source": model.source,
        "shared_stage": model.shared_stage(),
        "components": [
            {
                "name": c.name,
                "kind": c.kind.value,
                "modalities": [m.value for m in c.modalities],
                "generator": c.generator.value if c.generator else None,
                "edges": [e.model_dump() for e in c.edges],
                "size": c.size.provenance(),
            }
            for c in model.components
        ],
        "request_types": [
            {
                "name": r.name,
                "label": r.label,
                "inputs": [m.value for m in r.inputs],
                "output": r.output.value,
                "path": model.path_of(r.name),
                "first_response": r.first_response.value,
                "path_class": r.path_class.value,
                "priority": r.priority,
            }
            for r in model.request_types
        ],
        "executor_types": [e.model_dump(exclude_none=True) for e in model.executor_types],
    }


def models(json_out: JsonOpt = False) -> None:
    """List the models in the shipped catalog."""
    loaded = [(p, load_model(p)) for p in catalog_model_paths()]
    if json_out:
        print_json([model_json(m, p) for p, m in loaded])
        return
    table = Table(title="omniplane model catalog (omniplane show MODEL)")
    table.add_column("model", no_wrap=True)
    table.add_column("components")
    table.add_column("request types")
    for _, m in loaded:
        table.add_row(
            f"{m.name}\n[dim]{m.display_name}[/]",
            ", ".join(c.name for c in m.components),
            ", ".join(r.name for r in m.request_types),
        )
    print_table(table)


def gpus(json_out: JsonOpt = False) -> None:
    """List the GPU kinds of the catalog (names and aliases any command accepts, any case)."""
    catalog = load_gpus()
    rows = [{"name": g.name, "aliases": list(g.aliases), "sms": g.sms, "memory_gb": g.memory_gb,
             "bf16_tflops": g.bf16_tflops, "mem_bw_gbs": g.mem_bw_gbs,
             "interconnect": g.interconnect, "interconnect_gbs": g.interconnect_gbs,
             "gpus_per_node": g.gpus_per_node, "source": g.source} for g in catalog.gpus]
    if json_out:
        print_json({"file": str(catalog_gpus_path()), "gpus": rows})
        return
    table = Table(title="GPU kinds of the catalog")
    table.add_column("GPU", no_wrap=True)
    for col in ("SMs", "memory\nGB", "BF16\nTFLOP/s", "memory\nGB/s", "link GB/s"):
        table.add_column(col, justify="right", no_wrap=True)
    for g in catalog.gpus:
        table.add_row(g.name, str(g.sms), f"{g.memory_gb:g}", f"{g.bf16_tflops:g}", f"{g.mem_bw_gbs:g}",
                      f"{g.interconnect_gbs:g} {g.interconnect}")
    print_table(table)
    console.print("Every command takes a name or an alias, in any case:", highlight=False)
    for g in catalog.gpus:
        console.print(f"  {g.name}: {', '.join(g.aliases) or '-'}", highlight=False)


def _fmt_params(n: float) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def resolve_model(model: str) -> tuple[ModelSpec, Path]:
    """A model by a reference that :func:`omniplane.cli.options.model_ref` accepted."""
    from omniplane.spec import find_catalog_model

    path = find_catalog_model(model) or Path(model)
    return load_model(path), path


def show(
    model: Annotated[str, opt.argument("Catalog name or model spec file.", opt.model_ref(), "MODEL")],
    json_out: JsonOpt = False,
) -> None:
    """Show a model's components, edges, request types and their paths."""
    spec, path = resolve_model(model)
    if json_out:
        print_json(model_json(spec, path))
        return
    root = Tree(f"[bold]{spec.name}[/] — {spec.display_name}")
    comps = root.add("[bold]components[/]")
    for c in spec.components:
        kind = c.kind.value
        if c.modalities:
            kind += f" ({', '.join(m.value for m in c.modalities)})"
        if c.generator:
            kind += f" ({c.generator.value})"
        size = _fmt_params(c.size.params)
        if c.size.active_params:
            size += f" total, {_fmt_params(c.size.active_params)} active"
        node = comps.add(f"[cyan]{c.name}[/]: {kind}, {size}")
        for e in c.edges:
            flags = [f for f, on in (("colocatable", e.colocatable), ("streaming", e.streaming)) if on]
            node.add(f"-> {e.to}" + (f" [dim]({', '.join(flags)})[/]" if flags else ""))
    types = root.add("[bold]request types[/]")
    for r in spec.request_types:
        types.add(
            f"[green]{r.name}[/] {r.label}: {' -> '.join(spec.path_of(r.name))}  "
            f"[dim]{r.first_response.value}, {r.path_class.value} path[/]"
        )
    execs = root.add("[bold]executor types[/] (merged ones derived from colocatable edges)")
    for et in spec.executor_types:
        execs.add(f"{et.name}: tp {et.tp}, max_batch {et.max_batch}")
    console.print(root)


def _validate_one(path: Path) -> str:
    """The kind of a valid file; SpecError otherwise."""
    from importlib import import_module

    from omniplane.spec.yamlio import load_yaml

    data = load_yaml(path, "spec file")
    kind = data.get("kind") if isinstance(data, dict) else None
    if isinstance(kind, str) and kind in OTHER_KINDS:
        module, name = OTHER_KINDS[kind]
        getattr(import_module(module), name)(path)
        return kind
    doc = load_document(path)
    if isinstance(doc, WorkloadSpec) and isinstance(doc.arrival, TraceArrivals) \
            and doc.arrival.trace not in SHIPPED_TRACES:
        # a user's trace: replay it once, so bad rows, unknown types and unmapped fields are
        # reported now, not when the workload is first run
        from omniplane.workload import generate

        generate(load_workload(path), n=None, duration_s=doc.duration_s)
    return str(doc.kind)


def validate(
    files: Annotated[list[Path], typer.Argument(
        help="Spec files: model, workload, gpus, plan, or an SLO table (omniplane-slo-table).",
        metavar="FILE...")],
    json_out: JsonOpt = False,
) -> None:
    """Validate spec files; every issue is `file:line:col: field: what was expected`.

    Exit 0 when every file is valid, 2 when any is not (the same status as any other mistake).
    """
    results: list[dict[str, Any]] = []
    for f in files:
        try:
            kind = _validate_one(f)
            results.append({"file": str(f), "valid": True, "kind": kind, "issues": []})
        except SpecError as exc:
            results.append({
                "file": str(f),
                "valid": False,
                "issues": [
                    {"field": i.field, "message": i.message, "line": i.line, "column": i.column}
                    for i in exc.issues
                ],
                "text": str(exc).splitlines(),
            })
        except UserError as exc:  # a trace the workload replays: rows with their lines
            rows = getattr(exc, "issues", [])
            results.append({
                "file": str(f),
                "valid": False,
                "issues": [{"field": getattr(i, "column", None), "message": i.message,
                            "line": getattr(i, "line", None), "column": None,
                            "file": getattr(exc, "file", None)} for i in rows],
                "text": [f"{f}: arrival.trace: {x}" for x in str(exc).splitlines()],
            })
    if json_out:
        print_json(results)
    else:
        for r in results:
            if r["valid"]:
                console.print(f"[green]ok[/]      {r['file']} ({r['kind']})", highlight=False)
            else:
                for line in r["text"]:
                    print_error(line)
    if not all(r["valid"] for r in results):
        raise typer.Exit(USER_ERROR)
