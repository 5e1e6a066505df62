"""``omniplane perf capacity|predict``: ask the performance model before planning."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli import options as opt
from omniplane.cli.errors import fail
from omniplane.cli.output import console, print_json, print_table
from omniplane.perf import CostModel, ExecutorConfig, InfeasibleConfig
from omniplane.perf.query import OPS
from omniplane.spec import SpecError, find_catalog_model, load_gpus, load_model
from omniplane.spec.dist import MAX_WORK
from omniplane.spec.executor import MAX_BATCH

JsonOpt = Annotated[bool, opt.json_opt()]
RuntimeOpt = Annotated[str | None, typer.Option(
    metavar="NAME",
    help="Serving runtime whose host-side costs apply: roofline, vllm, vllm-v1 or cornserve "
         "(docs/reference/perf.md).")]
ModelOpt = Annotated[str, opt.model_opt("--model")]
WORK = int(MAX_WORK)  # the spec's bound on one request's tokens, steps or pixels per side


def _load(model: str, gpu: str) -> tuple[Any, Any]:
    try:
        spec = load_model(find_catalog_model(model) or Path(model))
        kind = load_gpus().get(gpu)
    except SpecError as exc:
        fail(str(exc))
    except KeyError as exc:
        fail(str(exc.args[0]))
    return spec, kind


def _cost(spec: Any, runtime: str | None) -> CostModel:
    try:
        return CostModel(spec, runtime=runtime)
    except KeyError as exc:
        fail(f"--runtime: {exc.args[0]}")


def capacity(
    model: ModelOpt,
    gpu: Annotated[str, opt.gpu_opt("--gpu")] = "A100-80GB",
    workload: Annotated[str | None, opt.workload_opt(
        help="Catalog workload or file whose request sizes to use (default: Table 2's conditions, "
             "repro/data/table2_conditions.json).")] = None,
    runtime: RuntimeOpt = "cornserve",
    json_out: JsonOpt = False,
) -> None:
    """Requests/s one executor of each component sustains, in Cornfigurator's Table 2 columns."""
    from omniplane.repro.capacity import COLUMNS, table2_sizes, workload_sizes
    from omniplane.spec import find_catalog_workload, load_workload

    spec, kind = _load(model, gpu)
    cost = _cost(spec, runtime)
    if workload is None:
        sizes, wl_name = table2_sizes(spec), "table2"
    else:
        try:
            wl = load_workload(find_catalog_workload(workload) or Path(workload))
        except SpecError as exc:
            fail(str(exc))
        if wl.model.name != spec.name:
            fail(f"--workload {workload!r} is for model {wl.model.name!r}, not {spec.name!r}")
        if wl.spec.mix is None:
            fail(f"--workload {workload!r}: a trace replay has no type mix; give a workload with a mix")
        sizes, wl_name = workload_sizes(spec, wl.spec.mix), wl.spec.name
    from omniplane.repro.capacity import capacity as run

    try:
        cols = run(spec, kind, cost, sizes)
    except InfeasibleConfig as exc:
        fail(str(exc))
    doc = {"model": spec.name, "gpu": kind.name, "workload": wl_name,
           "columns": {k: {"requests_per_s": round(c.requests_per_s, 4), "components": list(c.components),
                           "tp": c.tp, "max_batch": c.max_batch, "source": c.source}
                       for k in COLUMNS if (c := cols.get(k)) is not None}}
    if json_out:
        print_json(doc)
        return
    t = Table(title=f"per-executor capacity: {spec.name} on {kind.name} ({wl_name} sizes, "
                    f"{cost.runtime.name} runtime)")
    for col in ("column", "req/s", "components", "tp", "max batch"):
        t.add_column(col)
    for k, c in doc["columns"].items():
        t.add_row(k, f"{c['requests_per_s']:.3g}", " + ".join(c["components"]), str(c["tp"]),
                  str(c["max_batch"]))
    print_table(t)
    for k, c in doc["columns"].items():
        console.print(f"[dim]{k}: {c['source']}[/]", highlight=False)


def predict(
    model: ModelOpt,
    component: Annotated[str, typer.Option(metavar="NAME", help="Component of the model.")],
    gpu: Annotated[str, opt.gpu_opt("--gpu")],
    tp: Annotated[int | None, opt.tp_opt("GPUs per executor (default: smallest that fits)")] = None,
    batch: Annotated[int, opt.int_opt("--batch", help="Sequences, inputs, images or streams in the call.",
                                      lo=1, hi=MAX_BATCH)] = 1,
    prompt_tokens: Annotated[int | None, opt.int_opt(
        "--prompt-tokens", help="prefill: tokens per prompt; encode: LLM tokens per input; vocode: "
        "codec frames.", lo=1, hi=WORK)] = None,
    context_tokens: Annotated[int | None, opt.int_opt(
        "--context-tokens", help="decode_step: KV tokens per sequence; prefill: cached tokens per "
        "prompt.", lo=0, hi=WORK)] = None,
    op: Annotated[str | None, opt.choice_opt(
        "--op", help="The call (default: by the component's kind).", choices=OPS, what="op")] = None,
    width: Annotated[int | None, opt.int_opt("--width", help="Image width in pixels.", lo=1, hi=WORK)
                     ] = None,
    height: Annotated[int | None, opt.int_opt("--height", help="Image height in pixels.", lo=1, hi=WORK)
                      ] = None,
    steps: Annotated[int, opt.int_opt("--steps", help="denoise_step: steps in the call.", lo=1, hi=WORK)
                     ] = 1,
    cfg: Annotated[bool, typer.Option(
        "--cfg", help="denoise_step: classifier-free guidance (2 forwards).")] = False,
    runtime: RuntimeOpt = "vllm-v1",
    json_out: JsonOpt = False,
) -> None:
    """The model's time for one call of a component (docs/reference/perf.md)."""
    from omniplane.perf.query import OPS, Call, call_time, default_op, source_of

    spec, kind = _load(model, gpu)
    cost = _cost(spec, runtime)
    if component not in {c.name for c in spec.components}:
        names = ", ".join(c.name for c in spec.components)
        fail(f"--component {component!r}: model {spec.name!r} has {names}")
    the_op = op or default_op(cost, component)
    if the_op not in OPS:
        fail(f"--op {the_op!r}: expected one of {', '.join(OPS)}")
    config = _config(cost, component, kind, tp, batch)
    try:
        seconds = call_time(cost, component, config, Call(the_op, batch, prompt_tokens, context_tokens,
                                                          width, height, steps, cfg))
    except ValueError as exc:
        fail(str(exc))
    doc = {"model": spec.name, "component": component, "gpu": kind.name, "tp": config.tp, "batch": batch,
           "op": the_op, "ms": round(seconds * 1e3, 4), "source": source_of(cost, component, config, the_op)}
    if json_out:
        print_json(doc)
        return
    console.print(f"{spec.name} {component} {the_op} on {kind.name} x{config.tp}, batch {batch}: "
                  f"[bold]{doc['ms']:.4g} ms[/]")
    console.print(f"[dim]{doc['source']}[/]", highlight=False)


def _config(cost: CostModel, component: str, gpu: Any, tp: int | None, batch: int) -> ExecutorConfig:
    degrees = [tp] if tp else [1, 2, 4, 8]
    last: InfeasibleConfig | None = None
    for degree in degrees:
        try:
            cfg = ExecutorConfig(gpu, degree, max(batch, 1))
        except ValueError as exc:
            fail(f"--tp: {exc}")
        try:
            cost.check_fits([component], cfg)
            return cfg
        except InfeasibleConfig as exc:
            last = exc
    assert last is not None
    fail(str(last) + (f" (--tp {tp})" if tp else f"; no TP degree in {degrees} fits"))


def bench(
    model: ModelOpt,
    component: Annotated[str, typer.Option(metavar="NAME", help="LLM component of the model.")],
    gpu: Annotated[str, opt.gpu_opt("--gpu")],
    input_len: Annotated[int, opt.int_opt("--input-len", help="Prompt tokens per request.", lo=1, hi=WORK)],
    output_len: Annotated[int, opt.int_opt("--output-len", help="Tokens decoded per request (ignore_eos).",
                                           lo=1, hi=WORK)],
    concurrency: Annotated[int, opt.int_opt("--concurrency", help="Requests in flight (--max-concurrency).",
                                            lo=1, hi=MAX_BATCH)] = 1,
    num_prompts: Annotated[int | None, opt.int_opt(
        "--num-prompts", help="Requests in all (default: 4 x concurrency).", lo=1, hi=100_000)] = None,
    tp: Annotated[int | None, opt.tp_opt("GPUs per executor (default: smallest that fits)")] = None,
    runtime: RuntimeOpt = "vllm-v1",
    json_out: JsonOpt = False,
) -> None:
    """Replay ``vllm bench serve --max-concurrency`` on one executor of an LLM component: mean
    TTFT, TPOT and E2EL (docs/reference/perf.md, "Validation")."""
    from omniplane.perf.replay import closed_loop

    spec, kind = _load(model, gpu)
    cost = _cost(spec, runtime)
    llms = [c.name for c in spec.components if c.is_llm]
    if component not in llms:
        fail(f"--component {component!r}: model {spec.name!r} has LLM components {', '.join(llms)}")
    config = _config(cost, component, kind, tp, max(concurrency, 256))
    n = num_prompts or 4 * concurrency
    r = closed_loop(cost, component, config, input_len=input_len, output_len=output_len,
                    concurrency=concurrency, num_prompts=n)
    doc = {"model": spec.name, "component": component, "gpu": kind.name, "tp": config.tp,
           "runtime": cost.runtime.name, "input_len": input_len, "output_len": output_len,
           "concurrency": concurrency, "num_prompts": n, **r.to_json()}
    if json_out:
        print_json(doc)
        return
    console.print(f"{spec.name} {component} on {kind.name} x{config.tp} ({cost.runtime.name}), "
                  f"{input_len} in / {output_len} out, concurrency {concurrency}, {n} prompts: "
                  f"mean TTFT [bold]{doc['mean_ttft_ms']:.4g} ms[/], "
                  f"TPOT [bold]{doc['mean_tpot_ms']:.4g} ms[/], "
                  f"E2EL [bold]{doc['mean_e2el_ms']:.1f} ms[/]")
