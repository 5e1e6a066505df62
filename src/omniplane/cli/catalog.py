"""``omniplane models``, ``omniplane show`` and ``omniplane validate``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.tree import Tree

from omniplane.cli.output import console, err_console, fail, print_json
from omniplane.spec import (
    ModelSpec,
    SpecError,
    catalog_model_paths,
    find_catalog_model,
    load_document,
    load_model,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


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
    table = Table(title="omniplane model catalog")
    for col in ("model", "name", "components", "request types", "spec file"):
        table.add_column(col, overflow="fold")
    for p, m in loaded:
        table.add_row(
            m.name,
            m.display_name,
            ", ".join(c.name for c in m.components),
            ", ".join(r.name for r in m.request_types),
            p.name,
        )
    console.print(table)


def _fmt_params(n: float) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def _resolve(model: str) -> tuple[ModelSpec, Path | None]:
    path = find_catalog_model(model)
    if path is None:
        path = Path(model)
        if not path.is_file():
            fail(f"unknown model {model!r}: not in the catalog (see `omniplane models`) and no such file")
    try:
        return load_model(path), path
    except SpecError as exc:
        fail(str(exc))


def show(
    model: Annotated[str, typer.Argument(help="Catalog name or model spec file.")],
    json_out: JsonOpt = False,
) -> None:
    """Show a model's components, edges, request types and their paths."""
    spec, path = _resolve(model)
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


def validate(
    files: Annotated[list[Path], typer.Argument(help="Spec files (model, workload, gpus, plan).")],
    json_out: JsonOpt = False,
) -> None:
    """Validate spec files; exit 1 if any is invalid."""
    results: list[dict[str, Any]] = []
    for f in files:
        try:
            doc = load_document(f)
            results.append({"file": str(f), "valid": True, "kind": doc.kind, "issues": []})
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
    if json_out:
        print_json(results)
    else:
        for r in results:
            if r["valid"]:
                console.print(f"[green]ok[/]      {r['file']} ({r['kind']})", highlight=False)
            else:
                err_console.print(f"[red]invalid[/] {r['file']}", highlight=False)
                for line in r["text"]:
                    err_console.print(f"  {line}", highlight=False, soft_wrap=True)
    if not all(r["valid"] for r in results):
        raise typer.Exit(1)
