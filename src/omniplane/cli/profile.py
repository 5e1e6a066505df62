"""``omniplane profile``: measure a live executor and write a profile table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from omniplane.cli.output import console, err_console, fail, print_json
from omniplane.perf import ProfileSet
from omniplane.perf.profiler import ProfilerError, ProfileRun, RequestSpec, run_profile


def _request(text: str) -> RequestSpec:
    """``NAME:PROMPT_TOKENS:MAX_TOKENS[:MODALITY+MODALITY][@C1,C2,...][:burst]``, e.g.
    ``short:128:64``, ``speech:128:64:text+audio`` or ``d:64:64@1,8,32:burst`` (its own
    concurrency sweep, sent as bursts)."""
    burst = text.endswith(":burst")
    body = text.removesuffix(":burst")
    body, at, levels = body.partition("@")
    conc: tuple[int, ...] = ()
    if at:
        try:
            conc = tuple(int(c) for c in levels.split(","))
        except ValueError:
            raise typer.BadParameter(f"concurrency after '@' must be whole numbers in {text!r}") from None
        if not conc or min(conc) < 1:
            raise typer.BadParameter(f"concurrency after '@' must be >= 1 in {text!r}")
    parts = body.split(":")
    if len(parts) not in (3, 4):
        raise typer.BadParameter(f"expected NAME:PROMPT_TOKENS:MAX_TOKENS[:MODALITIES], got {text!r}")
    try:
        prompt, out = int(parts[1]), int(parts[2])
    except ValueError:
        raise typer.BadParameter(f"prompt and max tokens must be whole numbers in {text!r}") from None
    mods = tuple(parts[3].split("+")) if len(parts) == 4 else ("text",)
    return RequestSpec(parts[0], prompt, out, mods, concurrency=conc, burst=burst)


def profile(
    url: Annotated[str, typer.Option(help="Base URL of the OpenAI-compatible server.")],
    model: Annotated[str, typer.Option(help="Served model name (the request's 'model').")],
    component: Annotated[str, typer.Option(help="Component the table describes, e.g. thinker.")],
    gpu: Annotated[str, typer.Option(help="GPU kind the executor runs on.")],
    tp: Annotated[int, typer.Option(help="GPUs of the executor.")] = 1,
    request: Annotated[list[str] | None, typer.Option(
        "--request", help="NAME:PROMPT_TOKENS:MAX_TOKENS[:MODALITIES][@C1,C2][:burst]; repeatable.")] = None,
    concurrency: Annotated[str, typer.Option(help="Comma-separated concurrency sweep.")] = "1,2,4,8",
    requests_per_worker: Annotated[int, typer.Option(help="Requests each worker sends per point.")] = 4,
    timeout: Annotated[float, typer.Option(help="Per-request timeout, seconds.")] = 600.0,
    sample_rate: Annotated[int, typer.Option(help="Sample rate of raw 16-bit PCM audio chunks.")] = 24000,
    api: Annotated[str, typer.Option(
        help="chat (/v1/chat/completions) or completions (/v1/completions, token-id prompts).")] = "chat",
    vocab: Annotated[int, typer.Option(help="completions: the model's vocabulary size.")] = 0,
    out: Annotated[Path, typer.Option(help="Profile table (CSV) to write.")] = Path("profile.csv"),
    summary: Annotated[Path | None, typer.Option(help="Also write all metrics as JSON here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Sweep request types x concurrency against a live endpoint (steady-state window only) and
    write a profile table the cost model loads in place of the roofline."""
    try:
        levels = tuple(int(c) for c in concurrency.split(","))
    except ValueError:
        fail(f"--concurrency must be comma-separated whole numbers, got {concurrency!r}")
    specs = tuple(_request(r) for r in (request or ["default:256:128"]))
    run = ProfileRun(url.rstrip("/"), model, component, gpu, tp, specs, levels, requests_per_worker, timeout,
                     sample_rate, api, vocab)
    cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*cols, console=err_console, transient=json_out) as bar:
        task = bar.add_task("profiling", total=None)

        def tick(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        try:
            result = run_profile(run, tick)
        except ProfilerError as exc:
            fail(str(exc))
    ProfileSet(result.rows).save(out)
    if summary is not None:
        summary.write_text(json.dumps(result.to_json(), indent=2) + "\n")
    if json_out:
        print_json({**result.to_json(), "table": str(out)})
    else:
        for p in result.points:
            med = {k: v.get("median") for k, v in p.metrics.items()}
            shown = ", ".join(f"{k.upper()} {v * 1e3:.1f} ms" for k, v in med.items() if v is not None)
            console.print(f"{p.request} c={p.concurrency}: n={p.n_window} in window, {shown}")
        console.print(f"wrote {len(result.rows)} rows to {out}")
    if result.error:
        err_console.print(f"[bold red]error:[/] {result.error}")
        raise typer.Exit(1)
