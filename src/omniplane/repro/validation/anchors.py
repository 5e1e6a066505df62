"""The papers' own measurements (``repro/data/anchors.json``, copied from the seeds): points that
fit the serving runtimes' host-side factors (:mod:`omniplane.perf.runtime`).

* Cornfigurator Table 2 (A100-80GB): every cell is a point of the ``cornserve`` runtime,
  predicted by :func:`omniplane.repro.capacity.capacity` under Table 2's conditions.
* The Qwen3-Omni report's per-component table (concurrency 1, 4, 6; GPU not named, compared
  on H100-SXM and flagged): points of the ``vllm`` runtime. Its RTF is a check, not fitted.

HorizonServe's Figure 4 and Table 3 are the co-location model's (perf/colocation*.py).
"""

from __future__ import annotations

import json
import statistics
import weakref
from collections.abc import Callable
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from omniplane.perf.types import ExecutorConfig
from omniplane.repro.capacity import capacity
from omniplane.repro.validation.points import Context, Flag, Models, Point, Predictor, Role

TABLE2 = "cornfigurator-table2"
REPORT = "qwen3-omni-report"
REPORT_GPU = "H100-SXM"  # assumption: the report does not name its GPU
REPORT_CONTEXT = 512  # assumption: short conversation context of the report's latency runs
FRAME_S = 1.0 / 12.5


@cache
def anchors() -> dict[str, Any]:
    path = Path(str(files("omniplane.repro") / "data" / "anchors.json"))
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def table2_points(ctx: Context, runtime: str = "cornserve") -> list[Point]:
    t2 = anchors()["cornfigurator_table2"]
    gpu = ctx.gpu(t2["gpu"])
    # one capacity() per model and cost-model set, shared by that model's cells
    memo: weakref.WeakKeyDictionary[Models, dict[str, dict[str, float]]] = weakref.WeakKeyDictionary()

    def cell(model: str, column: str) -> Predictor:
        def predict(ms: Models) -> float:
            per = memo.setdefault(ms, {})
            if model not in per:
                cols = capacity(ctx.spec(model), gpu, ms.cost(model, runtime))
                per[model] = {k: c.requests_per_s for k, c in cols.items()}
            return per[model][column]
        return predict

    points = []
    for model, row in t2["rows"].items():
        for column, value in row.items():
            points.append(Point(f"table2/{model}/{column}", TABLE2,
                                f"{model} {column} per executor (Table 2 conditions)", t2["gpu"],
                                float(value), "req/s", Role.RUNTIME, cell(model, column),
                                t2["source"], runtime=runtime))
    return points


def report_points(ctx: Context, runtime: str = "vllm") -> list[Point]:
    r = anchors()["qwen3_omni_report_table2"]
    cfg = ExecutorConfig(ctx.gpu(REPORT_GPU), 1, 8)
    flags = (Flag.GPU_ASSUMED,)
    note = "the report does not name the GPU; compared on H100-SXM (assumption)"

    def thinker(c: int) -> Callable[[Models], float]:
        return lambda ms: 1e3 * ms.cost("qwen3-omni", runtime).decode_step_time(
            "thinker", cfg, c, c * REPORT_CONTEXT)

    def talker_main(c: int) -> Callable[[Models], float]:
        def f(ms: Models) -> float:
            cost = ms.cost("qwen3-omni", runtime)
            step = cost.decode_step_time("talker", cfg, c, c * REPORT_CONTEXT)
            return 1e3 * (step - cost.mtp_time("talker", cfg, c))
        return f

    def mtp(c: int) -> Callable[[Models], float]:
        return lambda ms: 1e3 * ms.cost("qwen3-omni", runtime).mtp_time("talker", cfg, c)

    def codec(c: int) -> Callable[[Models], float]:
        return lambda ms: 1e3 * ms.cost("qwen3-omni", runtime).vocoder_time("code2wav", cfg, c, FRAME_S)

    def rtf(c: int) -> Callable[[Models], float]:
        return lambda ms: (thinker(c)(ms) + talker_main(c)(ms) + mtp(c)(ms) + codec(c)(ms)) / (1e3 * FRAME_S)

    points = []
    for i, c in enumerate(r["concurrency"]):
        common = dict(role=Role.RUNTIME, source=r["source"], flags=flags, note=note, runtime=runtime)
        points += [
            Point(f"{REPORT}/thinker-step/c{c}", REPORT, f"thinker decode step, concurrency {c} "
                  f"({r['thinker_tokens_per_s'][i]} tok/s per stream)", REPORT_GPU,
                  1e3 / r["thinker_tokens_per_s"][i], "ms", predict=thinker(c), **common),
            Point(f"{REPORT}/talker-step/c{c}", REPORT, f"talker decode step without MTP, concurrency {c} "
                  f"({r['talker_tokens_per_s'][i]} tok/s per stream)", REPORT_GPU,
                  1e3 / r["talker_tokens_per_s"][i], "ms", predict=talker_main(c), **common),
            Point(f"{REPORT}/mtp-per-frame/c{c}", REPORT,
                  f"MTP module per frame (15 passes), concurrency {c}",
                  REPORT_GPU, float(r["mtp_ms_per_token"][i]), "ms", predict=mtp(c), **common),
            Point(f"{REPORT}/codec-per-code/c{c}", REPORT, f"codec decoder per code, concurrency {c}",
                  REPORT_GPU, float(r["codec_decoder_ms_per_code"][i]), "ms", predict=codec(c), **common),
        ]
        points.append(Point(f"{REPORT}/rtf/c{c}", REPORT, f"real-time factor, concurrency {c} (check: "
                            "thinker + talker + MTP + codec per 80 ms frame)", REPORT_GPU,
                            float(r["rtf"][i]), "ratio", Role.HELD_OUT, rtf(c), r["source"], flags, note,
                            runtime=runtime))
    return points


def table2_section(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Table 2's cells beside the model: per cell, published, predicted, error; and the summary
    the issue asks for (every cell within 30%, median within 15%, Qwen3-Omni llm : audio_output
    between 12x and 30x)."""
    cells = [r for r in rows if r["dataset"] == TABLE2]
    errs = sorted(abs(r["rel_error"]) for r in cells)
    by = {r["id"]: r for r in cells}
    llm, audio = by.get("table2/qwen3-omni/llm"), by.get("table2/qwen3-omni/audio_output")
    ratio = llm["predicted"] / audio["predicted"] if llm and audio else None
    return {
        "cells": [{"model": r["id"].split("/")[1], "column": r["id"].split("/")[2],
                   "published": r["measured"], "predicted": r["predicted"], "rel_error": r["rel_error"]}
                  for r in cells],
        "n": len(errs),
        "median_abs_err": round(statistics.median(errs), 4) if errs else None,
        "max_abs_err": round(errs[-1], 4) if errs else None,
        "within_30pct": sum(e <= 0.30 for e in errs),
        "qwen3_omni_llm_over_audio_output": round(ratio, 2) if ratio else None,
        "published_ratio": round(llm["measured"] / audio["measured"], 2) if llm and audio else None,
        "conditions": "repro/data/table2_conditions.json (ServeGen request-weighted sizes, vLLM/Cornserve "
                      "executor defaults, TP 2 above 30B); runtime cornserve",
    }


def report_section(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The Qwen3-Omni report's table by concurrency, and its ratios (thinker : talker step,
    MTP : talker step), published beside predicted."""
    r = anchors()["qwen3_omni_report_table2"]
    by = {x["id"]: x for x in rows if x["dataset"] == REPORT}
    out = []
    for c in r["concurrency"]:
        def get(kind: str, c: int = c) -> dict[str, Any]:
            return by[f"{REPORT}/{kind}/c{c}"]
        th, ta, mtp, codec, rtf = (get(k) for k in ("thinker-step", "talker-step", "mtp-per-frame",
                                                    "codec-per-code", "rtf"))
        out.append({"concurrency": c,
                    **{f"{k}_ms": [x["measured"], x["predicted"], x["rel_error"]]
                       for k, x in (("thinker_step", th), ("talker_step", ta), ("mtp_per_frame", mtp),
                                    ("codec_per_code", codec))},
                    "rtf": [rtf["measured"], rtf["predicted"], rtf["rel_error"]],
                    "thinker_over_talker": [round(th["measured"] / ta["measured"], 3),
                                            round(th["predicted"] / ta["predicted"], 3)],
                    "mtp_over_talker": [round(mtp["measured"] / ta["measured"], 3),
                                        round(mtp["predicted"] / ta["predicted"], 3)]})
    return {"gpu": REPORT_GPU, "runtime": "vllm", "rows": out}
