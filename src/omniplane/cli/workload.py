"""``omniplane workload show | plot | sample``: inspect workloads and traces, write requests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from omniplane.cli.output import console, fail, print_json
from omniplane.spec import ResolvedWorkload, SpecError, find_catalog_workload, load_workload
from omniplane.spec.yamlio import read_yaml
from omniplane.workload import (
    FORMATS,
    Summary,
    Trace,
    TraceError,
    generate,
    load_servegen,
    load_trace,
    resolve_trace,
    save_requests,
    summarize_requests,
    summarize_trace,
)

Target = Annotated[str, typer.Argument(
    help="Workload spec (catalog name or YAML file) or trace (shipped name, file or ServeGen folder).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
FormatOpt = Annotated[str | None, typer.Option(
    "--format", help=f"Trace format ({', '.join(FORMATS)}); inferred when omitted.")]
NOpt = Annotated[int | None, typer.Option("--n", min=1, help="Number of requests.")]
DurationOpt = Annotated[float | None, typer.Option("--duration", min=0.0, help="Seconds of traffic.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Random seed (default: the spec's).")]
RateOpt = Annotated[float | None, typer.Option("--rate", min=0.0, help="Mean arrival rate, req/s.")]


def _as_workload(target: str) -> ResolvedWorkload | None:
    """The workload spec ``target`` names, or None when it is a trace."""
    path = find_catalog_workload(target)
    if path is None:
        candidate = Path(target)
        if candidate.suffix not in (".yaml", ".yml") or not candidate.is_file():
            return None
        data, _ = read_yaml(candidate)
        kind = data.get("kind") if isinstance(data, dict) else None
        if kind != "workload":
            fail(f"{target}: not a workload spec (kind is {kind!r})")
        path = candidate
    try:
        return load_workload(path)
    except SpecError as exc:
        fail(str(exc))


def _requests(wl: ResolvedWorkload, n: int | None, duration: float | None, seed: int | None,
              rate: float | None) -> list[Any]:
    if n is None and duration is None and wl.spec.duration_s is None:
        n = 10_000
    try:
        return generate(wl, n=n, duration_s=duration, seed=seed, rate=rate)
    except (TraceError, ValueError) as exc:
        fail(str(exc))


def _summary(target: str, fmt: str | None, n: int | None, duration: float | None, seed: int | None,
             rate: float | None) -> tuple[Summary, list[Any] | None]:
    wl = _as_workload(target)
    if wl is not None:
        reqs = _requests(wl, n, duration, seed, rate)
        s = summarize_requests(reqs, str(wl.path))
        s.extra.update({"workload": wl.spec.name, "model": wl.model.name,
                        "arrival": wl.spec.arrival.process})
        return s, reqs
    trace, kind, extra = _trace(target, fmt, n, seed)
    return summarize_trace(trace, {"format": kind, **extra}), None


def _trace(
    target: str, fmt: str | None, n: int | None, seed: int | None
) -> tuple[Trace, str, dict[str, Any]]:
    """The trace ``target`` names (its first ``n`` rows); ServeGen: a seeded realisation."""
    try:
        path, kind = resolve_trace(target, fmt)
        if kind != "servegen":
            trace = load_trace(path, kind)
            return (trace if n is None else trace.take(slice(0, n))), kind, {}
        data = load_servegen(path)
        trace = data.sample(np.random.default_rng(seed or 0), n=n)
    except (FileNotFoundError, TraceError, ValueError) as exc:
        fail(str(exc))
    _, total = data.total_rate()
    return trace, kind, {
        "clients": len(data.clients), "published_rate_mean": float(total.mean()),
        "published_rate_min": float(total.min()), "published_rate_max": float(total.max()),
        "note": f"one seeded realisation (seed {seed or 0}) of the fitted distributions"}


def show(target: Target, json_out: JsonOpt = False, fmt: FormatOpt = None, n: NOpt = None,
         duration: DurationOpt = None, seed: SeedOpt = None, rate: RateOpt = None) -> None:
    """Counts, duration, rate, CV of inter-arrival times, type fractions and size percentiles."""
    s, _ = _summary(target, fmt, n, duration, seed, rate)
    if json_out:
        print_json(s.to_json())
        return
    console.print(f"[bold]{s.source}[/]", highlight=False)
    for k, v in s.extra.items():
        console.print(f"  {k}: {_fmt(v)}", highlight=False)
    console.print(f"  requests: {s.count}   duration: {s.duration_s:.1f} s   rate: {_fmt(s.rate)} req/s"
                  f"   CV of gaps: {_fmt(s.cv)}", highlight=False)
    if s.types:
        table = Table(title="request types")
        table.add_column("type")
        table.add_column("fraction", justify="right")
        for t, f in s.types.items():
            table.add_row(t, f"{f:.3f}")
        console.print(table)
    sizes = Table(title="sizes")
    for col in ("quantity", "mean", "p50", "p90", "p99"):
        sizes.add_column(col, justify="left" if col == "quantity" else "right")
    for k, d in s.sizes.items():
        if d:
            sizes.add_row(k, *(_fmt(d[c]) for c in ("mean", "p50", "p90", "p99")))
    console.print(sizes)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def plot(target: Target, out: Annotated[Path, typer.Option("--out", help="PNG file to write.")],
         fmt: FormatOpt = None, n: NOpt = None, duration: DurationOpt = None, seed: SeedOpt = None,
         rate: RateOpt = None,
         bins: Annotated[int, typer.Option("--bins", min=2, help="Time bins for the rate.")] = 60) -> None:
    """Write a PNG: arrival rate over time and size histograms."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wl = _as_workload(target)
    if wl is not None:
        reqs = _requests(wl, n, duration, seed, rate)
        times = np.array([r.arrival for r in reqs])
        sizes: dict[str, list[float]] = {}
        for r in reqs:
            for c, qs in r.work.items():
                for q, v in qs.items():
                    sizes.setdefault(f"{c}.{q}", []).append(v)
        series = {k: np.asarray(v) for k, v in sizes.items()}
        title = wl.spec.name
    else:
        trace, _, _ = _trace(target, fmt, n, seed)
        times, series, title = trace.arrival, dict(trace.fields), target
    if len(times) < 2:
        fail("too few requests to plot")
    shown = [k for k, v in series.items() if np.nanmax(v, initial=0) > 0 and len(np.unique(v)) > 1][:6]
    cols = 3
    rows = 1 + math.ceil(len(shown) / cols)
    fig = plt.figure(figsize=(12, 3.2 * rows))
    ax = fig.add_subplot(rows, 1, 1)
    counts, edges = np.histogram(times, bins=bins)
    ax.step(edges[:-1], counts / np.diff(edges), where="post")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("rate (req/s)")
    ax.set_title(f"{title}: {len(times)} requests")
    for i, k in enumerate(shown):
        h = fig.add_subplot(rows, cols, cols + i + 1)
        v = series[k][np.isfinite(series[k])]
        h.hist(v, bins=50)
        h.set_title(k, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    console.print(f"wrote {out}", highlight=False)


def sample(target: Annotated[str, typer.Argument(help="Workload spec (catalog name or YAML file).")],
           out: Annotated[Path, typer.Option("--out", help="JSONL file to write.")],
           n: NOpt = None, duration: DurationOpt = None, seed: SeedOpt = None,
           rate: RateOpt = None, json_out: JsonOpt = False) -> None:
    """Materialise a workload's requests (id, arrival, type, work, meta) as JSONL for replay."""
    wl = _as_workload(target)
    if wl is None:
        fail(f"{target}: not a workload spec; `sample` needs one to give requests their types")
    reqs = _requests(wl, n, duration, seed, rate)
    count = save_requests(out, reqs)
    if json_out:
        print_json({"file": str(out), "requests": count, "workload": wl.spec.name})
    else:
        console.print(f"wrote {count} requests to {out}", highlight=False)
