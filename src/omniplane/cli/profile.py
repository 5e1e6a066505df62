"""``omniplane profile``: measure a live executor and write a profile table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from omniplane.cli import options as opt
from omniplane.cli.errors import fail
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, err_console, print_json
from omniplane.cli.progress import StderrProgress
from omniplane.perf import ProfileSet
from omniplane.perf.profiler import ProfilerError, ProfileRun, RequestSpec, run_profile

MAX_CONCURRENCY = 4096  # --concurrency and a --request's @C levels: an assumption, far beyond one server


def _request(text: Any) -> RequestSpec:
    """``NAME:PROMPT_TOKENS:MAX_TOKENS[:MODALITY+MODALITY][@C1,C2,...][:burst]``, e.g.
    ``short:128:64``, ``speech:128:64:text+audio`` or ``d:64:64@1,8,32:burst`` (its own
    concurrency sweep, sent as bursts)."""
    if isinstance(text, RequestSpec):
        return text
    text = str(text)
    burst = text.endswith(":burst")
    body = text.removesuffix(":burst")
    body, at, levels = body.partition("@")
    conc: tuple[int, ...] = ()
    if at:
        try:
            conc = tuple(opt.Integer(1, MAX_CONCURRENCY)(c) for c in levels.split(","))
        except typer.BadParameter as exc:
            raise typer.BadParameter(f"concurrency after '@' in {text!r}: {exc.message}") from None
    parts = body.split(":")
    if len(parts) not in (3, 4):
        raise typer.BadParameter(f"expected NAME:PROMPT_TOKENS:MAX_TOKENS[:MODALITIES], got {text!r}")
    try:
        prompt, out = opt.Integer()(parts[1]), opt.Integer()(parts[2])
    except typer.BadParameter:
        raise typer.BadParameter(f"prompt and max tokens must be whole numbers (ASCII digits) in "
                                 f"{text!r}") from None
    if not (1 <= prompt <= 10_000_000 and 1 <= out <= 10_000_000):
        raise typer.BadParameter(f"prompt and max tokens must be from 1 to 10,000,000 in {text!r}")
    mods = tuple(parts[3].split("+")) if len(parts) == 4 else ("text",)
    return RequestSpec(parts[0], prompt, out, mods, concurrency=conc, burst=burst)


def profile(
    url: Annotated[str, opt.url_opt("--url", help="Base URL of the OpenAI-compatible server.")],
    model: Annotated[str, typer.Option(metavar="NAME", help="Served model name (the request's 'model').")],
    component: Annotated[str, typer.Option(metavar="NAME", help="Component the table describes, e.g. "
                                                                "thinker.")],
    gpu: Annotated[str, opt.gpu_opt("--gpu", help="GPU kind the executor runs on.")],
    tp: Annotated[int, opt.tp_opt("GPUs of the executor")] = 1,
    request: Annotated[list[RequestSpec] | None, typer.Option(
        "--request", metavar="SPEC", parser=_request,
        help="NAME:PROMPT_TOKENS:MAX_TOKENS[:MODALITIES][@C1,C2][:burst]; repeatable (default: "
             "default:256:128).")] = None,
    concurrency: Annotated[str, typer.Option(metavar="N,N,...", help="Comma-separated concurrency sweep.")
                           ] = "1,2,4,8",
    requests_per_worker: Annotated[int, opt.int_opt("--requests-per-worker", help="Requests each worker "
                                                    "sends per point.", lo=1, hi=100_000)] = 4,
    timeout: Annotated[float, opt.float_opt("--timeout", help="Per-request timeout, seconds.", lo=0,
                                            hi=86_400, lo_open=True, metavar="SECONDS")] = 600.0,
    sample_rate: Annotated[int, opt.int_opt("--sample-rate", help="Sample rate of raw 16-bit PCM audio "
                                            "chunks.", lo=1000, hi=384_000)] = 24000,
    api: Annotated[str, opt.choice_opt(
        "--api", help="chat (/v1/chat/completions) or completions (/v1/completions, token-id prompts).",
        choices=("chat", "completions"), what="API")] = "chat",
    vocab: Annotated[int, opt.int_opt("--vocab", help="completions: the model's vocabulary size (0: unset).",
                                      lo=0, hi=10_000_000)] = 0,
    out: Annotated[Path, opt.out_opt("--out", help="Profile table (CSV) to write.")] = Path("profile.csv"),
    summary: Annotated[Path | None, opt.out_opt("--summary", help="Also write all metrics as JSON here.")
                       ] = None,
    json_out: Annotated[bool, opt.json_opt("Print the metrics as JSON.")] = False,
) -> None:
    """Sweep request types x concurrency against a live endpoint (steady-state window only) and
    write a profile table the cost model loads in place of the roofline."""
    try:
        levels = tuple(opt.Integer(1, MAX_CONCURRENCY)(c) for c in concurrency.split(","))
    except typer.BadParameter as exc:
        fail(f"--concurrency: {exc.message}")
    if api == "completions" and vocab < 1:
        fail("--vocab: token-id prompts (--api completions) need the model's vocabulary size, e.g. "
             "--vocab 151936")
    specs = tuple(request or [_request("default:256:128")])
    run = ProfileRun(url.rstrip("/"), model, component, gpu, tp, specs, levels, requests_per_worker, timeout,
                     sample_rate, api, vocab)
    bar = StderrProgress("profile")
    seen = [0, -1]  # requests done, total (the profiler says the total with its first tick)

    def tick(done: int, total: int, label: str) -> None:
        if seen[1] != total:
            if seen[1] >= 0:
                bar.end()
            bar.start("requests", total)
            seen[:] = [0, total]
        bar.advance(done - seen[0], label)
        seen[0] = done

    try:
        result = run_profile(run, tick)
    except ProfilerError as exc:
        fail(f"--url {exc}")
    finally:
        if seen[1] >= 0:
            bar.end()
    with Outputs() as files:
        ProfileSet(result.rows).save(files.path(out))
        if summary is not None:
            files.json(summary, result.to_json())
        files.commit()
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
