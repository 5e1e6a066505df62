#!/usr/bin/env python3
"""HorizonServe's offline calibration of Qwen2.5-Omni on one GPU, in one shot (about 5 minutes
on an H200), then ``omniplane calibrate --from`` on any machine:

    PYTHONPATH=src python scripts/gpu_calibrate.py --out gpu_calibrate.json
    omniplane calibrate --from gpu_calibrate.json --deploy deploy.yaml   # deploy.yaml: vllm-omni config

Needs only torch (with CUDA), cuda-bindings (green contexts; else torch's) and nvidia-ml-py (the
memory-activity signal); no omniplane dependency, no download: the thinker and the talker are
random-weight decoders at their true shapes (:data:`SHAPES`, the catalog's ``size:`` from the
model's config.json), timed by :mod:`omniplane.gpu.torchbench`.

1. **Sweep** (one process): the thinker's decode (batch 8 at 600 tokens of context) and prefill
   (512 tokens) at every green-context partition (groups of 8 SMs on compute capability 9.0)
   and on the whole GPU; the same decode while the talker decodes on the complementary SMs, with
   NVML's memory activity meanwhile; solo first-response latency of each request type.
2. **Harness** (two processes: the thinker serving short text requests, the talker decoding in
   bursts, as vLLM-Omni's stages do; under MPS when ``nvidia-cuda-mps-control`` exists, with a
   private pipe directory, stopped at the end): the thinker's time to first token under FCFS (no
   cap), a static cap (the one-sided capacity curve's, after SGLang-Omni) and HorizonServe's
   throttling (Equation 1 on the measured ladder, ``B_sat`` and NVML's signal).

``--dry`` runs everything on the CPU with tiny shapes and no CUDA; its timings are synthetic and
the file says so (``synthetic: true``). Without a GPU (and without ``--dry``) it exits with status
2 and says why; it never writes made-up numbers as measurements.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MODEL = "qwen2.5-omni"
# the catalog's model facts (src/omniplane/catalog/models/qwen2.5-omni.yaml, from
# https://huggingface.co/Qwen/Qwen2.5-Omni-7B/blob/main/config.json); tests/gpu/test_gpu_calibrate.py
# checks them against the catalog, which this script cannot read (its loader needs pydantic)
SHAPES = {
    "shared": {"name": "thinker", "layers": 28, "hidden": 3584, "heads": 28, "kv_heads": 4, "head_dim": 128,
               "intermediate": 18944, "vocab": 152064},
    "downstream": {"name": "talker", "layers": 24, "hidden": 896, "heads": 12, "kv_heads": 4, "head_dim": 128,
                   "intermediate": 18944, "vocab": 8448},
}
# per request type: the means of the catalog's work distributions (omniplane.gpu.localrun.work_from_model)
WORK = {
    "t2t": {"output": "text", "prompt_tokens": 117, "output_tokens": 115, "down_tokens": 0},
    "a2t": {"output": "text", "prompt_tokens": 427, "output_tokens": 117, "down_tokens": 0},
    "i2t": {"output": "text", "prompt_tokens": 422, "output_tokens": 117, "down_tokens": 0},
    "v2t": {"output": "text", "prompt_tokens": 743, "output_tokens": 117, "down_tokens": 0},
    "t2a": {"output": "audio", "prompt_tokens": 117, "output_tokens": 115, "down_tokens": 516},
    "a2a": {"output": "audio", "prompt_tokens": 427, "output_tokens": 117, "down_tokens": 514},
    "i2a": {"output": "audio", "prompt_tokens": 422, "output_tokens": 117, "down_tokens": 514},
    "v2a": {"output": "audio", "prompt_tokens": 743, "output_tokens": 117, "down_tokens": 514},
}
POLICIES = ("fcfs", "static-cap", "horizon")
ACTIVE_S, IDLE_S = 3.0, 1.0  # assumption: the talker's bursts (long-path requests reaching it), then idle
LOAD = 0.5  # assumption: short-request arrivals at half the thinker's solo capacity (Poisson)
# the control record between the two harness processes: int64 slots
LEVEL, ACTIVE, PHASE, DOWN_READY, DOWN_STEPS, SLOTS = 0, 1, 2, 3, 4, 8
STOP = 9


class FakeSampler:
    """--dry: a memory-activity signal that follows the control record's downstream flag."""

    source, interval = "synthetic (dry run)", 0.0

    def __init__(self, ctl: Any = None) -> None:
        self.ctl = ctl

    def sample(self, now: float) -> float:
        return 0.55 + 0.4 * (get(self.ctl, ACTIVE) if self.ctl is not None else 0.5)

    def close(self) -> None:
        return None


def get(ctl: Any, slot: int) -> int:
    return int(struct.unpack_from("q", ctl, 8 * slot)[0])


def put(ctl: Any, slot: int, value: int) -> None:
    struct.pack_into("q", ctl, 8 * slot, value)


def open_ctl(path: Path) -> Any:
    with path.open("r+b") as f:
        return mmap.mmap(f.fileno(), 8 * SLOTS)


def backends(args: argparse.Namespace, levels: tuple[int, ...] | None, ctl: Any = None) -> tuple[Any, ...]:
    """(shared streams, downstream streams, sampler) for --device, or the null/fake ones with --dry."""
    from omniplane.gpu.backends import make_sampler, make_streams
    from omniplane.sched.ladder import LadderSpec, partition_rule

    spec = LadderSpec(levels=levels) if levels else LadderSpec()
    if args.dry:
        rule = partition_rule(9, 0)
        return (make_streams("null", spec, role="shared", device=0, total_sms=132, rule=rule),
                make_streams("null", spec, role="downstream", device=0, total_sms=132, rule=rule),
                FakeSampler(ctl))
    from omniplane.gpu import GpuUnavailable

    try:
        import torch
    except ImportError:
        raise GpuUnavailable("torch is not installed") from None
    if not torch.cuda.is_available():
        raise GpuUnavailable("torch.cuda: no CUDA device (CPU build or no GPU)")
    rule = partition_rule(*torch.cuda.get_device_capability(args.device))
    shared = make_streams("auto", spec, role="shared", device=args.device, total_sms=0, rule=rule)
    down = make_streams("auto", spec, role="downstream", device=args.device, total_sms=0, rule=rule)
    sampler = make_sampler("auto", device=args.device, min_interval_s=0.1, now=time.monotonic())
    return shared, down, sampler


def bench(args: argparse.Namespace, sampler: Any) -> Any:
    from omniplane.gpu.torchbench import TorchBench

    return TorchBench(SHAPES, WORK, device=args.device, dry=args.dry,
                      sampler=sampler if sampler.source != "null" else None)


# ---- phase 1: the sweep -------------------------------------------------------------------------
def phase_sweep(args: argparse.Namespace) -> dict[str, Any]:
    from omniplane.gpu.sweep import measure

    shared, down, sampler = backends(args, None)
    b = bench(args, sampler)
    doc = measure(b, shared, down, model=MODEL, gpu=args.gpu, device=b.device_name,
                  types={t: w["output"] for t, w in WORK.items()}, solo_requests=args.solo_requests,
                  log=lambda s: print(f"  {s}", file=sys.stderr, flush=True))
    doc["signal"] = {"source": getattr(sampler, "source", "null"), "reason": getattr(sampler, "reason", None)}
    sampler.close()
    return doc


def caps(doc: dict[str, Any]) -> dict[str, Any]:
    """The ladder (S_min..S_cap), B_sat and the static cap from the sweep, by omniplane's rules."""
    from omniplane.sched.ladder import PartitionRule
    from omniplane.sched.smsweep import SweepPoint, capacity_cap, sweep_ladder

    total, part = int(doc["total_sms"]), doc["partition"]
    pts = tuple(SweepPoint(int(p["sms"]), p["time_ms"] / 1e3) for p in doc["sweep"]["decode"])
    ladder = sweep_ladder(pts, total, PartitionRule(int(part["min_sms"]), int(part["align"])))
    static = capacity_cap(pts)
    bw = [p["bw_util"] for p in doc["corun"] if p["sms"] < total and p.get("bw_util") is not None]
    return {"levels": list(ladder.levels), "static_cap": static if static < total else None,
            "b_sat": max(bw) if bw else None, "total_sms": total}


# ---- phase 2: the two-process harness -------------------------------------------------------------
def phase_down(args: argparse.Namespace) -> None:
    """The talker: decode steps at batch 8 on the complement of the thinker's published level,
    ACTIVE_S on, IDLE_S off, while a policy runs."""
    ctl = open_ctl(args.ctl)
    _, down, sampler = backends(args, tuple(args.levels))
    b = bench(args, sampler)
    import torch

    plain = torch.cuda.Stream() if not args.dry else None
    put(ctl, DOWN_READY, 1)
    phase, t0 = 0, 0.0
    with torch.inference_mode():
        while True:
            p = get(ctl, PHASE)
            if p == STOP:
                return
            if p != phase:
                phase, t0 = p, time.monotonic()
            if p == 0:
                put(ctl, ACTIVE, 0)
                time.sleep(0.005)
                continue
            on = (time.monotonic() - t0) % (ACTIVE_S + IDLE_S) < ACTIVE_S
            put(ctl, ACTIVE, int(on))
            if not on:
                time.sleep(0.005)
                continue
            lvl = get(ctl, LEVEL)
            st = down.stream(lvl) if lvl >= 0 else plain
            with b.on(st):
                b.down.step(8, 600)
            b.sync()
            put(ctl, DOWN_STEPS, get(ctl, DOWN_STEPS) + 1)


def phase_shared(args: argparse.Namespace) -> dict[str, Any]:
    """The thinker serving a Poisson stream of short (t2t) requests one at a time, first token
    timed from arrival, under each policy."""
    from omniplane.sched.ladder import Ladder, PartitionRule
    from omniplane.sched.spatial import SpatialConfig, SpatialController

    ctl = open_ctl(args.ctl)
    plan = json.loads(args.plan.read_text())
    shared, _, sampler = backends(args, tuple(args.levels), ctl)
    b = bench(args, sampler)
    import torch

    levels = list(shared.ladder.levels)
    lad = Ladder(plan["total_sms"], tuple(plan["levels"]), PartitionRule(shared.ladder.rule.min_sms,
                                                                          shared.ladder.rule.align))
    prompt = WORK["t2t"]["prompt_tokens"]
    with torch.inference_mode():
        solo = b.time_ms(lambda: b.shared.prefill(prompt), None)
    rate = LOAD / (solo / 1e3) if not args.dry else 20.0  # a dry run: a few requests, not a load
    deadline = time.monotonic() + 300
    while get(ctl, DOWN_READY) != 1:
        if time.monotonic() > deadline or get(ctl, PHASE) == STOP:
            raise RuntimeError("the talker process did not start (see its error above)")
        time.sleep(0.05)
    out: dict[str, Any] = {"solo_ttft_ms": round(solo, 3), "rate_per_s": round(rate, 2),
                           "seconds": args.seconds, "signal": sampler.source, "policies": {}}
    for k, policy in enumerate(POLICIES, start=1):
        ctrl = SpatialController(lad, SpatialConfig(b_sat=plan["b_sat"] or 0.93))
        rng = random.Random(k)
        arrivals, t = [], 0.0
        while t < args.seconds:
            t += rng.expovariate(rate)
            arrivals.append(t)
        fixed = -1 if policy == "fcfs" or plan["static_cap"] is None else levels.index(plan["static_cap"])
        put(ctl, LEVEL, fixed if policy != "horizon" else -1)
        put(ctl, DOWN_STEPS, 0)
        put(ctl, PHASE, k)
        t0, ttft, used = time.monotonic(), [], {}
        with torch.inference_mode():
            for a in arrivals[:-1]:
                while time.monotonic() - t0 < a:
                    time.sleep(0.0005)
                lvl = fixed
                if policy == "horizon":
                    v = sampler.sample(time.monotonic())
                    if v is not None:
                        ctrl.observe(v)
                    cap = ctrl.select(get(ctl, ACTIVE))
                    lvl = levels.index(cap) if cap is not None and cap in levels else -1
                    put(ctl, LEVEL, lvl)
                used[lvl] = used.get(lvl, 0) + 1
                with b.on(shared.stream(lvl) if lvl >= 0 else None):
                    b.shared.prefill(prompt)
                b.sync()
                ttft.append((time.monotonic() - t0 - a) * 1e3)
        put(ctl, PHASE, 0)
        ttft.sort()
        out["policies"][policy] = {
            "requests": len(ttft),
            "ttft_p50_ms": round(ttft[len(ttft) // 2], 3),
            "ttft_p95_ms": round(ttft[max(0, -(-95 * len(ttft) // 100) - 1)], 3),
            "down_steps_per_s": round(get(ctl, DOWN_STEPS) / args.seconds, 2),
            "sms_used": {("whole GPU" if i < 0 else str(levels[i])): n for i, n in sorted(used.items())},
        }
        print(f"  harness {policy}: {out['policies'][policy]}", file=sys.stderr, flush=True)
    put(ctl, PHASE, STOP)
    return out


def start_mps(args: argparse.Namespace, tmp: Path) -> tuple[dict[str, str], Any]:
    """(environment of the harness processes, a function stopping the daemon): MPS with a private
    pipe directory when its control binary exists (--mps auto), else time-sliced processes."""
    env = dict(os.environ)
    binary = shutil.which("nvidia-cuda-mps-control")
    if args.dry or args.mps == "off" or binary is None:
        if args.mps == "on":
            raise SystemExit("gpu_calibrate: --mps on, but nvidia-cuda-mps-control is not on PATH")
        return env, None
    env["CUDA_MPS_PIPE_DIRECTORY"] = str(tmp / "mps-pipe")
    env["CUDA_MPS_LOG_DIRECTORY"] = str(tmp / "mps-log")
    for d in ("mps-pipe", "mps-log"):
        (tmp / d).mkdir()
    subprocess.run([binary, "-d"], env=env, check=True)
    return env, lambda: subprocess.run([binary], input=b"quit\n", env=env, check=False)


def child(args: argparse.Namespace, phase: str, out: Path, extra: list[str], env: dict[str, str]) -> Any:
    cmd = [sys.executable, __file__, "--phase", phase, "--out", str(out), "--device", str(args.device),
           "--solo-requests", str(args.solo_requests), "--seconds", str(args.seconds), *extra]
    if args.gpu:
        cmd += ["--gpu", args.gpu]
    if args.dry:
        cmd.append("--dry")
    return subprocess.Popen(cmd, env=env)


def run(args: argparse.Namespace) -> int:
    started, t_start = datetime.now(UTC).isoformat(timespec="seconds"), time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="gpu_calibrate-"))
    try:
        env = dict(os.environ)
        sweep_out = tmp / "sweep.json"
        rc = child(args, "sweep", sweep_out, [], env).wait()
        if rc != 0:
            return rc
        doc = json.loads(sweep_out.read_text())
        plan = caps(doc)
        print(f"ladder {plan['levels']}, static cap {plan['static_cap']}, B_sat {plan['b_sat']} "
              f"({time.monotonic() - t_start:.0f} s)", file=sys.stderr, flush=True)
        # the harness fits what is left of --budget-s (its processes start in about a minute)
        left = args.budget_s - (time.monotonic() - t_start) - 90.0
        args.seconds = min(args.seconds, max(3.0, left / len(POLICIES)))
        levels = sorted(set(plan["levels"]) | ({plan["static_cap"]} if plan["static_cap"] else set()))
        (tmp / "plan.json").write_text(json.dumps(plan))
        ctl_path = tmp / "ctl"
        ctl_path.write_bytes(bytes(8 * SLOTS))
        env, stop_mps = start_mps(args, tmp)
        extra = ["--ctl", str(ctl_path), "--plan", str(tmp / "plan.json"), "--levels", *map(str, levels)]
        try:
            down = child(args, "down", tmp / "down.json", extra, env)
            shared = child(args, "shared", tmp / "harness.json", extra, env)
            ctl = open_ctl(ctl_path)
            while shared.poll() is None:  # a talker that died before it was ready stops the thinker
                if down.poll() not in (None, 0) and get(ctl, DOWN_READY) != 1:
                    put(ctl, PHASE, STOP)
                time.sleep(0.2)
            shared_rc = shared.returncode
            put(ctl, PHASE, STOP)  # the talker stops even when the thinker failed
            try:
                down.wait(60)
            except subprocess.TimeoutExpired:
                down.kill()
        finally:
            if stop_mps is not None:
                stop_mps()
        harness = (json.loads((tmp / "harness.json").read_text()) if shared_rc == 0
                   else {"error": f"the harness's thinker process exited with status {shared_rc}"})
        harness.update({"mps": stop_mps is not None, "plan": plan,
                        "note": ("two processes under MPS" if stop_mps is not None else
                                 "two processes time-sliced (no MPS): SM caps cannot overlap the stages")})
        doc["harness"] = harness
        doc["script"] = {"name": "scripts/gpu_calibrate.py", "started": started,
                         "seconds": round(time.monotonic() - t_start, 1), "dry": args.dry}
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.out} in {time.monotonic() - t_start:.0f} s; next: omniplane calibrate --from "
              f"{args.out}", file=sys.stderr)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--gpu", default=None, help="catalog GPU kind to record (e.g. H200; default: none)")
    ap.add_argument("--dry", action="store_true", help="CPU, tiny shapes, synthetic timings (marked)")
    ap.add_argument("--solo-requests", type=int, default=10, help="requests per type for the solo p95")
    ap.add_argument("--seconds", type=float, default=20.0, help="harness seconds per policy")
    ap.add_argument("--budget-s", type=float, default=450.0,
                    help="wall-time target: the harness shortens to fit what the sweep left")
    ap.add_argument("--mps", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--phase", choices=("all", "sweep", "shared", "down"), default="all",
                    help=argparse.SUPPRESS)
    ap.add_argument("--ctl", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--plan", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--levels", type=int, nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.dry:
        args.seconds = min(args.seconds, 1.0)
        args.gpu = args.gpu or "H200"
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # the dry run's processes share a small CPU
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from omniplane.gpu import GpuUnavailable

    try:
        if args.phase == "all":
            return run(args)
        if args.phase == "sweep":
            args.out.write_text(json.dumps(phase_sweep(args)))
        elif args.phase == "shared":
            args.out.write_text(json.dumps(phase_shared(args)))
        else:
            phase_down(args)
        return 0
    except GpuUnavailable as exc:
        print(f"gpu_calibrate: cannot run here: {exc} (--dry runs on the CPU with synthetic timings)",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
