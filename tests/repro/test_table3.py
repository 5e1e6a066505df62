"""HorizonServe Table 3 beside the simulator: one row per GPU, load point and policy, and the
shape judged per GPU and load point from those rows."""

from __future__ import annotations

from omniplane.repro.horizon.table3 import GPUS, POLICIES, table3


def test_table3_rows_and_shape_follow_the_simulated_tpot() -> None:
    t3 = table3(requests=12, rates=(0.2,))
    assert len(t3["rows"]) == len(GPUS) * len(POLICIES)
    for s in t3["shape_by_gpu"]:
        rows = [r for r in t3["rows"] if r["gpu"] == s["gpu"] and r["rate"] == s["rate"]]
        van = next(r for r in rows if r["policy"] == "vanilla")
        mps = next(r for r in rows if r["policy"] == "mps")
        assert van["p50_vs_vanilla"] == 0.0
        for r in rows:  # from the rounded TPOTs, to the rounding
            assert abs(r["p50_vs_vanilla"] - (r["predicted"][0] / van["predicted"][0] - 1)) < 1e-3
        assert s["p50_within_5pct_of_vanilla"] == all(abs(r["p50_vs_vanilla"]) <= 0.05 for r in rows)
        assert s["mps_lowers_p95"] == (mps["predicted"][1] < van["predicted"][1])
    assert t3["shape"]["rate 0.2"]["mps_lowers_p95"] == all(s["mps_lowers_p95"] for s in t3["shape_by_gpu"])
