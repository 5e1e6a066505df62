"""Splitwise's measured iteration times (data/splitwise-perf/perf_model.csv, MIT).

Each (model, hardware, TP, prompt size, batch, output tokens) configuration was run about five
times; a point is the median of its runs. ``prompt_time`` is one prefill iteration of ``batch``
prompts of ``prompt_size`` tokens; ``token_time`` the mean decode step while the context grows
from ``prompt_size`` to ``prompt_size + token_size`` (so the mean context is the midpoint).
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict

from omniplane.perf.types import ExecutorConfig
from omniplane.repro.validation.points import (
    Context,
    Flag,
    NotExpressible,
    Point,
    Predictor,
    Role,
    data_dir,
)

FILE = "splitwise-perf/perf_model.csv"
SOURCE = "data/splitwise-perf/perf_model.csv (github.com/Mutinifni/splitwise-sim, MIT)"
HARDWARE = {"a100-80gb": "A100-80GB", "h100-80gb": "H100-SXM"}
FIT_MODEL = "llama2-70b"  # factors are fitted to this model; bloom-176b is held out

Key = tuple[str, str, int, int, int, int]  # model, hardware, tp, prompt, batch, tokens


def _groups() -> dict[Key, list[tuple[float, float]]]:
    out: dict[Key, list[tuple[float, float]]] = defaultdict(list)
    with (data_dir() / FILE).open() as fh:
        for r in csv.DictReader(fh):
            key = (r["model"], r["hardware"], int(r["tensor_parallel"]), int(r["prompt_size"]),
                   int(r["batch_size"]), int(r["token_size"]))
            out[key].append((float(r["prompt_time"]), float(r["token_time"])))
    return out


def _anomalous(groups: dict[Key, list[tuple[float, float]]]) -> set[Key]:
    """Configurations whose prefill of ``b`` prompts took less than 3/4 of the time of ``b/2``
    prompts (twice the tokens cannot prefill faster: a failed or truncated run); in this file
    TP 2 at batch 64 on both GPUs. Both of their times are flagged."""
    med = {k: statistics.median(p for p, _ in v) for k, v in groups.items()}
    bad = set()
    for (m, hw, tp, p, b, t), pt in med.items():
        smaller = (m, hw, tp, p, b // 2, t)
        if b > 1 and smaller in med and pt < 0.75 * med[smaller]:
            bad.add((m, hw, tp, p, b, t))
    return bad


def _prompt(model: str, gpu: str, tp: int, p: int, b: int, ctx: Context) -> Predictor:
    cfg = ExecutorConfig(ctx.gpu(gpu), tp, b)
    return lambda ms: 1e3 * ms.cost(model).prefill_time("llm", cfg, p * b, requests=b)


def _token(model: str, gpu: str, tp: int, p: int, b: int, t: int, ctx: Context) -> Predictor:
    cfg = ExecutorConfig(ctx.gpu(gpu), tp, b)
    context = int(b * (p + t / 2))
    return lambda ms: 1e3 * ms.cost(model).decode_step_time("llm", cfg, b, context)


def splitwise_points(ctx: Context) -> tuple[list[Point], list[NotExpressible]]:
    groups = _groups()
    bad = _anomalous(groups)
    points: list[Point] = []
    skipped: dict[str, int] = defaultdict(int)
    for key in sorted(groups):
        model, hw, tp, p, b, t = key
        if hw not in HARDWARE:
            skipped[hw] += 2
            continue
        gpu = HARDWARE[hw]
        runs = groups[key]
        role = Role.FIT if model == FIT_MODEL else Role.HELD_OUT
        flags = (Flag.ANOMALOUS,) if key in bad else ()
        note = ("prefill faster than for half as many prompts (failed or truncated run); "
                "excluded from the fit and the medians") if flags else ""
        base = f"splitwise/{model}/{hw}/tp{tp}/p{p}-b{b}-t{t}"
        what = f"{model} {gpu} TP{tp}: {b} x {p}-token prompt"
        points.append(Point(
            f"{base}/prompt", "splitwise", f"{what}, prefill iteration", gpu,
            statistics.median(r[0] for r in runs), "ms", role, _prompt(model, gpu, tp, p, b, ctx),
            SOURCE, flags, note))
        points.append(Point(
            f"{base}/token", "splitwise", f"{what}, decode step over {t} tokens", gpu,
            statistics.median(r[1] for r in runs), "ms", role,
            _token(model, gpu, tp, p, b, t, ctx), SOURCE, flags, note))
    missing = [NotExpressible("splitwise", f"{hw} rows (prompt and token times)", n,
                              "power-capped H100 ('h100-80gb-pcap'): no such GPU kind in the catalog")
               for hw, n in sorted(skipped.items())]
    return points, missing
