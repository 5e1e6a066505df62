"""HorizonServe's Table 3 beside the simulator: the shared stage's TPOT (p50 / p95) under every
policy, for ``omniplane perf validate`` (the co-location model's anchor set).

The paper's claim is a shape: under every policy the p50 TPOT is within a few percent of
Vanilla's, and MPS lowers p95. Each run here is one load point (rate 0.5 req/s, long-path
fraction 0.3: Figure 8's stressed rate point) with a fixed request count and seed, on the
single-GPU testbed of :mod:`omniplane.sched.experiment`.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

from omniplane.sched.experiment import single_gpu

POLICIES = ("vanilla", "edf", "mps", "edf-mps", "horizon")
GPUS = {"rtx6000ada": "RTX6000Ada", "rtxpro6000": "RTXPRO6000"}
RATE, LONG_FRACTION = 0.5, 0.3


def published() -> dict[str, Any]:
    path = Path(str(files("omniplane.perf") / "data" / "anchors.json"))
    table: dict[str, Any] = json.loads(path.read_text())["horizonserve"]["table3_tpot_p50_p95_ms"]
    return table


def table3(model: str = "qwen2.5-omni", requests: int = 200, seed: int = 0) -> dict[str, Any]:
    pub = published()[model]
    rows = []
    for key, gpu in GPUS.items():
        testbed = single_gpu(model, key, 1)
        got = {p: testbed.run(p, RATE, LONG_FRACTION, requests, seed).shared_tpot_ms for p in POLICIES}
        van = got["vanilla"]
        for p in POLICIES:
            rows.append({"gpu": gpu, "policy": p, "published": pub[key][p],
                         "predicted": [round(got[p]["p50"], 2), round(got[p]["p95"], 2)],
                         "p50_vs_vanilla": round(got[p]["p50"] / van["p50"] - 1, 4),
                         "published_p50_vs_vanilla": round(pub[key][p][0] / pub[key]["vanilla"][0] - 1, 4)})
    shape = {
        "p50_within_5pct_of_vanilla": all(abs(r["p50_vs_vanilla"]) <= 0.05 for r in rows),
        "mps_lowers_p95": all(
            next(r for r in rows if r["gpu"] == g and r["policy"] == "mps")["predicted"][1]
            < next(r for r in rows if r["gpu"] == g and r["policy"] == "vanilla")["predicted"][1]
            for g in GPUS.values()),
    }
    return {"model": model, "rate": RATE, "long_fraction": LONG_FRACTION, "requests": requests, "seed": seed,
            "rows": rows, "shape": shape,
            "command": f"omniplane perf validate (table3: {model}, {requests} requests per policy, "
                       f"seed {seed})"}
