"""One LLM decode step taken apart: bytes read (of which experts), their time at the runtime's
achieved bandwidth, the fixed time (``step_s`` + layers x ``layer_s``) and the per-sequence
time, per runtime; for docs/results/perf-vllm-omni-ci.md ("Diagnosis").

    .venv/bin/python scripts/decode_breakdown.py [--model qwen3-omni] [--component thinker]
        [--gpu H100-SXM] [--runtime vllm --runtime vllm-v1] [--point 1:100 --point 8:3000 ...]

Each ``--point`` is ``batch:context tokens per sequence``.
"""

from __future__ import annotations

import argparse

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.spec import catalog_gpus_path, find_catalog_model, load_gpus, load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3-omni")
    ap.add_argument("--component", default="thinker")
    ap.add_argument("--gpu", default="H100-SXM")
    ap.add_argument("--runtime", action="append", default=None)
    ap.add_argument("--point", action="append", default=None)
    args = ap.parse_args()
    path = find_catalog_model(args.model)
    if path is None:
        ap.error(f"--model {args.model!r}: not in the catalog")
    spec = load_model(path)
    cfg = ExecutorConfig(load_gpus(catalog_gpus_path()).get(args.gpu), 1, 256)
    points = []
    for p in args.point or ["1:100", "8:3000", "32:3000"]:
        try:
            b, c = (int(x) for x in p.split(":"))
        except ValueError:
            ap.error(f"--point {p!r}: expected BATCH:CONTEXT, e.g. 8:3000")
        points.append((b, c))
    print("| runtime | B | C | step | bytes (experts) | bytes time | fixed | per-seq |")
    print("|---|---|---|---|---|---|---|---|")
    for rt in args.runtime or ["vllm", "vllm-v1"]:
        cost = CostModel(spec, runtime=rt)
        co = cost._coeffs(args.component, cfg)
        for b, c in points:
            w = co.work(0, 0, 1, b, b * c)
            experts = co.expert_bytes * (1.0 - co.miss ** b) if co.moe else 0.0
            step = cost.decode_step_time(args.component, cfg, b, b * c)
            print(f"| `{rt}` | {b} | {c} | {1e3 * step:.2f} ms | "
                  f"{w.bytes / 1e9:.1f} GB ({experts / 1e9:.1f}) | "
                  f"{1e3 * w.bytes / co.rates.bytes:.2f} ms at {co.rates.bytes / 1e12:.2f} TB/s | "
                  f"{1e3 * co.fixed_s:.2f} ms | {1e3 * co.per_seq_s * b:.2f} ms |")


if __name__ == "__main__":
    main()
