#!/usr/bin/env python3
"""GPU check: the SM ladder, kernel times at each SM level alone and next to a bandwidth-heavy
co-runner on the complementary partition, and NVML/GPM memory pressure meanwhile.

    python scripts/gpu_check.py --out gpu_check.json          # one GPU, about 1-3 minutes on an H200
    omniplane calibrate --from gpu_check.json                 # fit the co-location model, derive S_cap

Needs torch with CUDA, and cuda-bindings (preferred: complementary partitions, granted SM counts
read back) or torch's green contexts; nvidia-ml-py for the pressure samples. Without a GPU it
exits with status 2 and says why; it never writes made-up numbers.

Kernels (per GPU, so the fit knows their work exactly):
- ``membound``: a bf16 copy of ``--copy-mib`` MiB (reads and writes it: 2 x bytes, no FLOPs);
- ``compute``: a bf16 ``--matmul`` cubed matmul (2 n^3 FLOPs, 3 n^2 x 2 bytes);
- co-runner: the same copy on the other partition, re-launched until the measured kernel ends.

The output is a fixed-SM sweep in omniplane's format (docs/reference/perf.md, "Sweep format")
plus ``granted_sms`` / ``corun_sms`` per point, the ladder description and the NVML samples.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPEATS = 5  # timed runs per point (median), after WARMUP
WARMUP = 2
PRESSURE_WINDOW_S = 0.3  # per point with a pressure reading: > 2 GPM intervals (>= 100 ms each)


def catalog_kind(device_name: str, sms: int) -> str | None:
    """The catalog GPU kind whose name or alias appears in the device name and whose SM count
    matches (None if none does: pass --gpu)."""
    from omniplane.spec import catalog_gpus_path, load_gpus

    name = device_name.lower().replace(" ", "").replace("-", "")
    for kind in load_gpus(catalog_gpus_path()).gpus:
        keys = [kind.name, *getattr(kind, "aliases", [])]
        if kind.sms == sms and any(k.lower().replace(" ", "").replace("-", "") in name for k in keys):
            return str(kind.name)
    return None


def build_document(
    *,
    gpu: str,
    device: str,
    backend: str,
    copy_bytes: float,
    matmul_n: int,
    points: list[dict[str, Any]],
    ladder: dict[str, Any],
    pressure: dict[str, Any],
    started: str,
    seconds: float,
) -> dict[str, Any]:
    """The sweep document (pure: tested without a GPU)."""
    n = matmul_n
    return {
        "kind": "omniplane-sm-sweep",
        "gpu": gpu,
        "synthetic": False,
        "source": f"measured: scripts/gpu_check.py on {device} ({backend}), {started}, {seconds:.0f} s",
        "device": device,
        "ladder_backend": backend,
        "ladder": ladder,
        "pressure": pressure,
        "works": {
            "membound": {"flops": 0, "bytes": 2.0 * copy_bytes},
            "compute": {"flops": 2.0 * n**3, "bytes": 3.0 * n * n * 2.0},
        },
        "points": points,
    }


class PressureThread:
    """Samples memory pressure every ``interval`` s in the background; ``window()`` returns the
    mean of the samples taken between two calls."""

    def __init__(self, sampler: Any, interval: float) -> None:
        self.sampler, self.interval = sampler, interval
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._mark = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            v = self.sampler.sample(now)
            if v is not None and (not self.samples or self.samples[-1][0] != now):
                self.samples.append((now, v))
            self._stop.wait(self.interval)

    def start(self) -> PressureThread:
        self._t.start()
        return self

    def window(self) -> float | None:
        got = [v for _, v in self.samples[self._mark :]]
        self._mark = len(self.samples)
        return statistics.fmean(got) if got else None

    def stop(self) -> None:
        self._stop.set()
        self._t.join(5)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from omniplane.gpu import GpuUnavailable
    from omniplane.gpu.backends import make_sampler, make_streams
    from omniplane.sched.ladder import LadderSpec, partition_rule

    if not torch.cuda.is_available():
        raise GpuUnavailable("torch.cuda: no CUDA device (CPU build or no GPU)")
    dev = args.device
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    total = int(props.multi_processor_count)
    gpu = args.gpu or catalog_kind(props.name, total)
    if gpu is None:
        raise SystemExit(f"gpu_check: {props.name} ({total} SMs) is not a catalog GPU kind; pass --gpu NAME")
    spec = LadderSpec(levels=tuple(args.levels) if args.levels else None, s_min=args.s_min, step=args.step)
    rule = partition_rule(props.major, props.minor)
    shared = make_streams(args.backend, spec, role="shared", device=dev, total_sms=total, rule=rule)
    down = make_streams(args.backend, spec, role="downstream", device=dev, total_sms=total, rule=rule)
    if shared.backend == "null":
        raise GpuUnavailable(f"no green-context backend: {shared.describe().get('reason')}")
    sampler = make_sampler("auto", device=dev, min_interval_s=0.1, now=time.monotonic())
    pressure = PressureThread(sampler, 0.1).start() if sampler.source != "null" else None

    elems = int(args.copy_mib * (1 << 20) // 2)
    src = torch.empty(elems, dtype=torch.bfloat16, device=dev).normal_()
    dst = torch.empty_like(src)
    csrc, cdst = torch.empty_like(src).normal_(), torch.empty_like(src)
    n = args.matmul
    a = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    kernels = {"membound": lambda: dst.copy_(src), "compute": lambda: torch.mm(a, b)}

    def timed(fn: Any, stream: Any, corun_stream: Any) -> float:
        """Median ms of ``fn`` on ``stream``, with the co-runner looping on ``corun_stream``."""
        times = []
        for i in range(WARMUP + REPEATS):
            torch.cuda.synchronize(dev)
            if corun_stream is not None:
                with torch.cuda.stream(corun_stream):
                    for _ in range(args.corun_launches):
                        cdst.copy_(csrc)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(stream):
                start.record(stream)
                fn()
                end.record(stream)
            torch.cuda.synchronize(dev)
            if i >= WARMUP:
                times.append(start.elapsed_time(end))
        return statistics.median(times)

    def loaded_pressure(fn: Any, stream: Any) -> float | None:
        """Mean pressure while ``fn`` runs back to back on ``stream`` for PRESSURE_WINDOW_S."""
        if pressure is None:
            return None
        torch.cuda.synchronize(dev)
        pressure.window()
        t_end = time.monotonic() + PRESSURE_WINDOW_S
        with torch.cuda.stream(stream):
            while time.monotonic() < t_end:
                fn()
                torch.cuda.synchronize(dev)
        return pressure.window()

    t0 = time.monotonic()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    points: list[dict[str, Any]] = []
    for i, s in enumerate(shared.ladder.levels):
        stream, other = shared.stream(i), down.stream(i)
        for name, fn in kernels.items():
            for corun in (False, True):
                p: dict[str, Any] = {
                    "sms": int(shared.granted[i]),
                    "requested_sms": s,
                    "kernel": name,
                    "corun": corun,
                    "time_ms": round(timed(fn, stream, other if corun else None), 5),
                }
                if corun:
                    p["corun_sms"] = int(down.granted[i])
                if name == "membound" and not corun:
                    u = loaded_pressure(fn, stream)
                    if u is not None and u > 0:
                        p["bw_util"] = round(u, 4)
                points.append(p)
        print(
            f"  level {s:>4} SMs (granted {shared.granted[i]}, complement {down.granted[i]}): "
            f"{time.monotonic() - t0:.0f} s",
            file=sys.stderr,
        )
    if pressure is not None:
        pressure.stop()
    press = {
        "source": sampler.source,
        "samples": len(pressure.samples) if pressure else 0,
        "interval_s": getattr(sampler, "interval", None),
    }
    sampler.close()
    ladder = {"shared": shared.describe(), "downstream": down.describe()}
    return build_document(
        gpu=gpu,
        device=f"{props.name} ({total} SMs, cc {props.major}.{props.minor})",
        backend=shared.backend,
        copy_bytes=elems * 2.0,
        matmul_n=n,
        points=points,
        ladder=ladder,
        pressure=press,
        started=started,
        seconds=time.monotonic() - t0,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--gpu", help="catalog GPU kind (default: recognised from the device name)")
    ap.add_argument(
        "--backend", default="auto", choices=["auto", "cuda", "torch"], help="green-context backend"
    )
    ap.add_argument("--levels", type=int, nargs="*", help="SM levels (default: the whole valid ladder)")
    ap.add_argument("--s-min", type=int, default=None)
    ap.add_argument("--step", type=int, default=None)
    ap.add_argument("--copy-mib", type=float, default=512.0, help="size of the copied buffer, MiB")
    ap.add_argument("--matmul", type=int, default=8192, help="matmul size n (n x n by n x n, bf16)")
    ap.add_argument("--corun-launches", type=int, default=64, help="co-runner copies queued per timed run")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from omniplane.gpu import GpuUnavailable

    try:
        doc = run(args)
    except GpuUnavailable as exc:
        print(f"gpu_check: cannot run here: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(
        f"wrote {args.out}: {len(doc['points'])} points; next: omniplane calibrate --from {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
