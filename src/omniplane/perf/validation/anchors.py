"""The papers' own measurements (``perf/data/anchors.json``, copied from the seeds): points that
fit the serving runtimes' host-side factors (:mod:`omniplane.perf.runtime`).

* Cornfigurator Table 2 (A100-80GB): every cell is a point of the ``cornserve`` runtime,
  predicted by :func:`omniplane.perf.capacity.capacity` under Table 2's conditions.
* The Qwen3-Omni report's per-component table (concurrency 1, 4, 6; GPU not named, compared
  on H100-SXM and flagged): points of the ``vllm`` runtime. Its RTF is a check, not fitted.

HorizonServe's Figure 4 and Table 3 are the co-location model's (perf/colocation*.py).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from omniplane.perf.capacity import capacity
from omniplane.perf.types import ExecutorConfig
from omniplane.perf.validation.points import Context, Flag, Models, Point, Predictor, Role

TABLE2 = "cornfigurator-table2"
REPORT = "qwen3-omni-report"
REPORT_GPU = "H100-SXM"  # assumption: the report does not name its GPU
REPORT_CONTEXT = 512  # assumption: short conversation context of the report's latency runs
FRAME_S = 1.0 / 12.5


@cache
def anchors() -> dict[str, Any]:
    path = Path(str(files("omniplane.perf") / "data" / "anchors.json"))
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
                  1e3 / r["thinker_tokens_per_s"][i], "ms", predict=thinker(c), **common),  # type: ignore[arg-type]
            Point(f"{REPORT}/talker-step/c{c}", REPORT, f"talker decode step without MTP, concurrency {c} "
                  f"({r['talker_tokens_per_s'][i]} tok/s per stream)", REPORT_GPU,
                  1e3 / r["talker_tokens_per_s"][i], "ms", predict=talker_main(c), **common),  # type: ignore[arg-type]
            Point(f"{REPORT}/mtp-per-frame/c{c}", REPORT, f"MTP module per frame (15 passes), concurrency {c}",
                  REPORT_GPU, float(r["mtp_ms_per_token"][i]), "ms", predict=mtp(c), **common),  # type: ignore[arg-type]
            Point(f"{REPORT}/codec-per-code/c{c}", REPORT, f"codec decoder per code, concurrency {c}",
                  REPORT_GPU, float(r["codec_decoder_ms_per_code"][i]), "ms", predict=codec(c), **common),  # type: ignore[arg-type]
        ]
        points.append(Point(f"{REPORT}/rtf/c{c}", REPORT, f"real-time factor, concurrency {c} (check: "
                            "thinker + talker + MTP + codec per 80 ms frame)", REPORT_GPU,
                            float(r["rtf"][i]), "ratio", Role.HELD_OUT, rtf(c), r["source"], flags, note,
                            runtime=runtime))
    return points
