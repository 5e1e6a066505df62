"""vLLM-Omni's CI performance files (``repro/data/vllm_omni_ci.json``) beside the ``vllm-v1`` runtime.

Each benchmark is replayed as it ran: a closed-loop client at the file's concurrency and prompt
count on one executor of the thinker (:func:`omniplane.perf.replay.closed_loop`), priced by the
cost model with the runtime under test. A ``ceiling`` is a bound (the prediction must be under
it); a ``measured`` value of the omni pipeline is a bound on the thinker's share where the
replay omits the pipeline's other work (encoders, hand-offs). Where a ceiling is a fit target
(split ``fit``) the target is ``ceiling / ceiling_margin`` (the data file says why), and the
check ceilings are also shown at that margin as points, so the fitted-vs-checked error is
visible. The split is written in the data file, chosen before fitting.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from omniplane.perf.costmodel import CostModel
from omniplane.perf.factors import Calibration
from omniplane.perf.replay import closed_loop
from omniplane.perf.types import ExecutorConfig
from omniplane.repro.validation.points import Context

RUNTIME = "vllm-v1"
MODEL = "qwen3-omni"
MAX_BATCH = 256  # vLLM's default max_num_seqs: the CI files do not set it


def data_path() -> Path:
    return Path(str(files("omniplane.repro") / "data" / "vllm_omni_ci.json"))


@cache
def ci_data() -> dict[str, Any]:
    path = data_path()
    data: dict[str, Any] = json.loads(path.read_text())
    for b in data.get("benchmarks", []):
        for key in ("id", "file", "commit", "kind", "component", "random_input_len", "random_output_len"):
            if key not in b:
                raise ValueError(f"{path}: benchmarks[{b.get('id', '?')}]: missing {key!r}")
        if b["kind"] not in ("ceiling", "measured"):
            raise ValueError(f"{path}: benchmarks[{b['id']}].kind: expected 'ceiling' or 'measured', "
                             f"got {b['kind']!r}")
    return data


@dataclass(frozen=True)
class CIPoint:
    """One published number of one benchmark at one load."""

    id: str
    benchmark: str
    metric: str  # mean_ttft_ms | mean_e2el_ms
    kind: str  # ceiling | measured
    split: str  # fit | check
    value_ms: float
    concurrency: int
    num_prompts: int
    input_len: int
    output_len: int
    component: str
    tp: int
    source: str

    def target_ms(self, margin: float) -> float:
        """The point a fit aims at: a ceiling less its margin; a measured value itself."""
        return self.value_ms / margin if self.kind == "ceiling" else self.value_ms


def ci_points() -> list[CIPoint]:
    data = ci_data()
    out: list[CIPoint] = []
    for b in data["benchmarks"]:
        loads = b.get("max_concurrency") or [1] * len(b.get("request_rate", []))
        for metric, split_key in (("mean_e2el_ms", "split_e2el"), ("mean_ttft_ms", "split_ttft")):
            values = b.get(metric, [])
            splits = b.get(split_key, [])
            for i, v in enumerate(values):
                split = splits[i] if i < len(splits) else "check"
                if split not in ("fit", "check"):
                    continue
                load = (f"c{loads[i]}" if b.get("max_concurrency") else f"rate{b['request_rate'][i]:g}")
                out.append(CIPoint(f"vllm-omni-ci/{b['id']}/{metric.removeprefix('mean_')}/{load}",
                                   b["id"], metric, b["kind"], split, float(v), int(loads[i]),
                                   int(b["num_prompts"][i]), int(b["random_input_len"]),
                                   int(b["random_output_len"]), b["component"], int(b.get("tp", 1)),
                                   f"vllm-project/vllm-omni {b['commit']} {b['file']}"))
    return out


def predict_all(ctx: Context, calibration: Calibration, points: Sequence[CIPoint],
                runtime: str = RUNTIME) -> list[float]:
    """Each point's predicted value (ms): one closed-loop replay per benchmark and load.

    Open-loop points (a request rate) are replayed at concurrency 1: the CI's rates keep the
    server nearly idle between requests, and one request alone is the least load they can see,
    so the prediction stays a lower bound of what ran."""
    gpu = ctx.gpu(ci_data()["gpu"])
    cost = CostModel(ctx.spec(MODEL), calibration=calibration, runtime=runtime)
    memo: dict[tuple[str, int, int, int, int, int], Any] = {}
    out = []
    for p in points:
        key = (p.component, p.tp, p.input_len, p.output_len, p.concurrency, p.num_prompts)
        if key not in memo:
            memo[key] = closed_loop(cost, p.component, ExecutorConfig(gpu, p.tp, MAX_BATCH),
                                    input_len=p.input_len, output_len=p.output_len,
                                    concurrency=p.concurrency, num_prompts=p.num_prompts)
        r = memo[key]
        out.append(1e3 * (r.e2el_s if p.metric == "mean_e2el_ms" else r.ttft_s))
    return out


def ci_section(ctx: Context, calibration: Calibration, runtime: str = RUNTIME) -> dict[str, Any]:
    """Every CI point with its prediction: bound respected or not, and the error against the
    fit target (ceiling / margin, or the measured value)."""
    data = ci_data()
    margin = float(data["ceiling_margin"])
    pts = ci_points()
    preds = predict_all(ctx, calibration, pts, runtime)
    fit_benchmarks = {p.benchmark for p in pts if p.split == "fit"}

    def is_point(p: CIPoint) -> bool:
        # a point as well as a bound: the fit targets, and the check E2EL ceilings of the
        # benchmark the fit uses (same server, same sizes: the margin applies alike)
        return p.split == "fit" or (p.benchmark in fit_benchmarks and p.metric == "mean_e2el_ms")

    rows = []
    for p, pred in zip(pts, preds, strict=True):
        err = round(pred / p.target_ms(margin) - 1.0, 4) if is_point(p) else None
        rows.append({"id": p.id, "benchmark": p.benchmark, "metric": p.metric, "kind": p.kind,
                     "split": p.split, "load": p.id.rsplit("/", 1)[-1], "published_ms": p.value_ms,
                     "predicted_ms": round(pred, 1), "within_bound": pred <= p.value_ms,
                     "target_ms": round(p.target_ms(margin), 1) if err is not None else None,
                     "rel_error_to_target": err,
                     "source": p.source})

    def stats(rs: list[dict[str, Any]]) -> dict[str, Any]:
        errs = sorted(abs(r["rel_error_to_target"]) for r in rs)
        if not errs:
            return {"n": 0}
        return {"n": len(errs), "median_abs_err": round(statistics.median(errs), 4),
                "max_abs_err": round(errs[-1], 4)}

    check_points = [r for r in rows if r["split"] == "check" and r["rel_error_to_target"] is not None]
    return {
        "runtime": runtime, "gpu": data["gpu"], "ceiling_margin": margin,
        "split": data["split_note"], "rows": rows,
        "fit": stats([r for r in rows if r["split"] == "fit"]),
        "check_points": stats(check_points),
        "bounds": {"n": len(rows), "respected": sum(r["within_bound"] for r in rows)},
        "not_used": data.get("not_used", []),
    }


# ---- the fit of the vllm-v1 runtime ------------------------------------------------------------
# assumption: vLLM v1 samples a whole batch in one GPU kernel and builds outputs in a separate
# process; what is left per sequence on the step's path is list bookkeeping, a few microseconds.
# Not identifiable beside step_s and the expert pool from the CI's three fit loads, so held.
PER_SEQ_S = 2e-5
# Free factors: (name, low, high, start) and why the bounds.
FREE_V1 = (
    ("step_s", 0.0, 0.02, 2e-3),  # host time per iteration: 0 to 20 ms
    # fraction of peak DRAM bandwidth: at most 0.9 (what a streaming copy reaches on H100's HBM3)
    ("memory", 0.3, 0.9, 0.8),
    # fraction of a layer's experts one iteration's tokens route among: top-k / experts to 1
    ("moe_expert_pool", 0.0625, 1.0, 0.5),
)


def v1_base(calibration: Calibration) -> Any:
    """The ``vllm-v1`` runtime before its fit: the talker-side factors (MTP, vocoder) held from
    the ``vllm`` runtime (the CI's text benchmarks do not exercise them), CUDA-graph decode."""
    src = calibration.runtime("vllm")
    return src.with_factors(
        name=RUNTIME, source="vLLM v1 as vLLM-Omni's CI runs it (CUDA-graph decode, async scheduling)",
        layer_s=None, per_seq_s=PER_SEQ_S, fitted_to=(),
        factor_sources={
            **{k: f"held: the vllm runtime's ({src.source_of(k)})"
               for k in ("mtp_pass_s", "mtp_batched", "vocoder_call_s", "vocoder_chunk_frames")},
            "layer_s": "the GPU kind's layer_s: vLLM v1 captures CUDA graphs for decode by default "
                       "(compilation_config.cudagraph_mode), and the CI files do not pass --enforce-eager",
            "per_seq_s": "assumption: vLLM v1 samples the batch in one GPU kernel and detokenises in "
                         "another process; a few microseconds per sequence remain on the step's path",
            "guidance": "the model's defaults (GUIDANCE_PASSES)",
        })


def fit_v1(ctx: Context, calibration: Calibration) -> Any:
    """``vllm-v1`` with ``FREE_V1`` fitted (bounded least squares on log(predicted / target)) to
    the CI points of split ``fit``; the target of a ceiling is ceiling / margin."""
    import numpy as np
    from scipy.optimize import least_squares

    margin = float(ci_data()["ceiling_margin"])
    pts = [p for p in ci_points() if p.split == "fit"]
    target = np.array([p.target_ms(margin) for p in pts])
    base = v1_base(calibration)

    def trial(x: Any) -> Any:
        return base.with_factors(**{f[0]: float(v) for f, v in zip(FREE_V1, x, strict=True)})

    def residuals(x: Any) -> Any:
        pred = np.array(predict_all(ctx, calibration.with_runtime(trial(x)), pts))
        return np.log(pred / target)

    x0 = np.array([f[3] for f in FREE_V1])
    res = least_squares(residuals, x0, bounds=(np.array([f[1] for f in FREE_V1]),
                                               np.array([f[2] for f in FREE_V1])),
                        x_scale=np.array([1e-3, 0.1, 0.1]), diff_step=1e-2, method="trf")
    err = statistics.median(float(abs(np.exp(r) - 1.0)) for r in res.fun)
    why = {"step_s": "host time per LLM iteration under async scheduling, s",
           "memory": "fraction of peak DRAM bandwidth the decode kernels reach",
           "moe_expert_pool": "fraction of a MoE layer's experts one iteration's tokens route among "
                              "(routing skew; 1 = uniform)"}
    sources = dict(base.factor_sources)
    for f, v in zip(FREE_V1, res.x, strict=True):
        hit = " (at its bound)" if np.isclose(v, f[1]) or np.isclose(v, f[2]) else ""
        sources[f[0]] = (f"fitted: {why[f[0]]}; {len(pts)} vLLM-Omni CI points (split fit in "
                         f"repro/data/vllm_omni_ci.json), bounds [{f[1]:g}, {f[2]:g}]{hit}")
    return trial(res.x).with_factors(
        source=(f"fitted: {len(FREE_V1)} factors to {len(pts)} vLLM-Omni CI E2EL ceilings at "
                f"ceiling / {margin:g} (bounded least squares on log(predicted/target), in-sample "
                f"median error {err:.1%}); H100-SXM"),
        factor_sources=sources, fitted_to=tuple(p.id for p in pts))
