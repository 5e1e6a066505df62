"""HorizonServe's Table 3 beside the simulator: the shared stage's TPOT (p50 / p95) under every
policy, for ``omniplane perf validate`` (the co-location model's anchor set).

The paper's claim is a shape: under every policy the p50 TPOT is within a few percent of
Vanilla's, and MPS lowers p95. The paper does not say at which load Table 3 was measured, so
it is checked at both ends of Figure 8's arrival-rate sweep (rates 0.2 and 0.5 req/s at
long-path fraction 0.3), each with a fixed request count and seed (common random numbers), on
the single-GPU testbed of :mod:`omniplane.repro.horizon.experiment`; the shape is judged per load point.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

from omniplane.repro.horizon.experiment import FIXED_LONG_FRACTION, RATES, single_gpu

POLICIES = ("vanilla", "edf", "mps", "edf-mps", "horizon")
GPUS = {"rtx6000ada": "RTX6000Ada", "rtxpro6000": "RTXPRO6000"}
LOAD_POINTS = (RATES[0], RATES[-1])  # Figure 8's lowest and highest arrival rate
LONG_FRACTION = FIXED_LONG_FRACTION


def published() -> dict[str, Any]:
    path = Path(str(files("omniplane.repro") / "data" / "anchors.json"))
    table: dict[str, Any] = json.loads(path.read_text())["horizonserve"]["table3_tpot_p50_p95_ms"]
    return table


def table3(model: str = "qwen2.5-omni", requests: int = 200, seed: int = 0,
           rates: Sequence[float] = LOAD_POINTS) -> dict[str, Any]:
    pub = published()[model]
    rows: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    for key, gpu in GPUS.items():
        testbed = single_gpu(model, key, 1)
        for rate in rates:
            got = {p: testbed.run(p, rate, LONG_FRACTION, requests, seed).shared_tpot_ms for p in POLICIES}
            van = got["vanilla"]
            here = [{"gpu": gpu, "rate": rate, "policy": p, "published": pub[key][p],
                     "predicted": [round(got[p]["p50"], 2), round(got[p]["p95"], 2)],
                     "p50_vs_vanilla": round(got[p]["p50"] / van["p50"] - 1, 4),
                     "published_p50_vs_vanilla": round(pub[key][p][0] / pub[key]["vanilla"][0] - 1, 4)}
                    for p in POLICIES]
            rows += here
            shapes.append({"gpu": gpu, "rate": rate,
                           "p50_within_5pct_of_vanilla": all(abs(r["p50_vs_vanilla"]) <= 0.05 for r in here),
                           "largest_p50_change": max((r["p50_vs_vanilla"] for r in here), key=abs),
                           "mps_lowers_p95": got["mps"]["p95"] < van["p95"]})
    shape: dict[str, dict[str, bool]] = {}
    for rate in rates:
        at = [s for s in shapes if s["rate"] == rate]
        shape[f"rate {rate:g}"] = {
            "p50_within_5pct_of_vanilla": all(s["p50_within_5pct_of_vanilla"] for s in at),
            "mps_lowers_p95": all(s["mps_lowers_p95"] for s in at)}
    return {"model": model, "rates": list(rates), "long_fraction": LONG_FRACTION, "requests": requests,
            "seed": seed, "rows": rows, "shape": shape, "shape_by_gpu": shapes,
            "command": f"omniplane perf validate (table3: {model}, {requests} requests per policy and "
                       f"load point, seed {seed})"}
