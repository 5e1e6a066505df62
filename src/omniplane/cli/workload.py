"""``omniplane workload show | plot | sample``: inspect workloads and traces, write requests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli import options as opt
from omniplane.cli.errors import fail
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, print_json, print_table
from omniplane.errors import unknown_name
from omniplane.spec import ResolvedWorkload, catalog_workload_paths, find_catalog_workload, load_workload
from omniplane.spec.catalog import SHIPPED_TRACES
from omniplane.spec.yamlio import load_yaml

FORMATS = ("azure", "mooncake", "servegen", "csv", "jsonl")  # omniplane.workload.FORMATS (tested)
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")  # what matplotlib's Agg backend writes without extras
DEFAULT_N = 10_000  # requests of a generated workload that gives no duration_s


def _target(value: Any) -> str:
    """A catalog workload, a workload file, a shipped trace name, a trace file or a folder."""
    text = str(value).strip()
    if find_catalog_workload(text) is not None or text in SHIPPED_TRACES or Path(text).exists():
        return text
    known = [p.stem for p in catalog_workload_paths()] + list(SHIPPED_TRACES)
    raise typer.BadParameter(f"{unknown_name('workload or trace', text, known)}; or give a workload "
                             "spec, a trace file or a ServeGen folder")


def _spec_target(value: Any) -> str:
    text = _target(value)
    if find_catalog_workload(text) is None and Path(text).suffix not in (".yaml", ".yml"):
        raise typer.BadParameter(f"{text}: not a workload spec (a catalog name or YAML file); "
                                 "`sample` needs one to give requests their types")
    return text


Target = Annotated[str, opt.argument(
    "Workload spec (catalog name or YAML file) or trace (shipped name, file or ServeGen folder).",
    _target, "TARGET")]
JsonOpt = Annotated[bool, opt.json_opt()]
FormatOpt = Annotated[str | None, opt.choice_opt("--format", help="Trace format; inferred when omitted.",
                                                 choices=FORMATS, what="trace format")]
NOpt = Annotated[int | None, opt.n_opt(f"Number of requests (a generated workload without duration_s: "
                                       f"{DEFAULT_N:,}; a trace: to its end).")]
DurationOpt = Annotated[float | None, opt.duration_opt(help="Seconds of traffic.")]
SeedOpt = Annotated[int | None, opt.seed_opt("Random seed (default: the spec's).")]
RateOpt = Annotated[float | None, opt.rate_opt()]


def _as_workload(target: str) -> ResolvedWorkload | None:
    """The workload spec ``target`` names, or None when it is a trace."""
    path = find_catalog_workload(target)
    if path is None:
        candidate = Path(target)
        if candidate.suffix not in (".yaml", ".yml") or not candidate.is_file():
            return None
        data = load_yaml(candidate, "workload spec")
        kind = data.get("kind") if isinstance(data, dict) else None
        if kind != "workload":
            fail(f"{target}: kind: not a workload spec (kind is {kind!r}; expected kind: workload)")
        path = candidate
    return load_workload(path)


def _requests(wl: ResolvedWorkload, n: int | None, duration: float | None, seed: int | None,
              rate: float | None) -> list[Any]:
    traced = wl.spec.arrival.process == "trace"
    if n is None and duration is None and wl.spec.duration_s is None and not traced:
        n = DEFAULT_N
    from omniplane.workload import generate

    return generate(wl, n=n, duration_s=duration, seed=seed, rate=rate)


def _summary(target: str, fmt: str | None, n: int | None, duration: float | None, seed: int | None,
             rate: float | None) -> tuple[Any, list[Any] | None]:
    from omniplane.workload import summarize_requests, summarize_trace

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
) -> tuple[Any, str, dict[str, Any]]:
    """The trace ``target`` names (its first ``n`` rows); ServeGen: a seeded realisation."""
    import numpy as np

    from omniplane.workload import load_servegen, load_trace, resolve_trace

    path, kind = resolve_trace(target, fmt)
    if kind != "servegen":
        trace = load_trace(path, kind)
        return (trace if n is None else trace.take(slice(0, n))), kind, {}
    if not path.is_dir():
        fail(f"{path}: a ServeGen trace is a folder of client files (docs/reference/workloads.md)")
    data = load_servegen(path)
    trace = data.sample(np.random.default_rng(seed or 0), n=n)
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
        table.add_column("type", no_wrap=True)
        table.add_column("fraction", justify="right")
        for t, f in s.types.items():
            table.add_row(t, f"{f:.3f}")
        print_table(table)
    sizes = Table(title="sizes")
    for col in ("quantity", "mean", "p50", "p90", "p99"):
        sizes.add_column(col, justify="left" if col == "quantity" else "right")
    for k, d in s.sizes.items():
        if d:
            sizes.add_row(k, *(_fmt(d[c]) for c in ("mean", "p50", "p90", "p99")))
    print_table(sizes)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.4g}"  # rate and CV of fewer than two instants
    return str(v)


def plot(target: Target, out: Annotated[Path, opt.out_opt("--out", help="Figure to write (PNG, SVG or PDF).",
                                                          suffixes=FIGURE_SUFFIXES)],
         fmt: FormatOpt = None, n: NOpt = None, duration: DurationOpt = None, seed: SeedOpt = None,
         rate: RateOpt = None,
         bins: Annotated[int, opt.int_opt("--bins", help="Time bins for the rate.", lo=2, hi=10_000)] = 60
         ) -> None:
    """Write a figure: arrival rate over time and size histograms."""
    import numpy as np

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
        fail(f"{target}: {len(times)} request(s); a plot of the arrival rate needs at least 2")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    with Outputs() as files:
        fig.savefig(files.path(out), dpi=100, format=out.suffix.lower().removeprefix("."))
        plt.close(fig)
        files.commit()
    console.print(f"wrote {out}", highlight=False)


def sample(target: Annotated[str, opt.argument("Workload spec (catalog name or YAML file).", _spec_target,
                                               "WORKLOAD")],
           out: Annotated[Path, opt.out_opt("--out", help="JSONL file to write.", suffixes=(".jsonl",))],
           n: NOpt = None, duration: DurationOpt = None, seed: SeedOpt = None,
           rate: RateOpt = None, json_out: JsonOpt = False) -> None:
    """Materialise a workload's requests (id, arrival, type, work, meta) as JSONL for replay."""
    wl = _as_workload(target)
    if wl is None:
        fail(f"{target}: not a workload spec; `sample` needs one to give requests their types")
    reqs = _requests(wl, n, duration, seed, rate)
    with Outputs() as files:
        from omniplane.workload import save_requests

        count = save_requests(files.path(out), reqs)
        files.commit()
    if json_out:
        print_json({"file": str(out), "requests": count, "workload": wl.spec.name})
    else:
        console.print(f"wrote {count} requests to {out}", highlight=False)
