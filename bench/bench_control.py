"""Update and read cost of the shared-memory control record (HorizonServe Table 4 reports 33-35 us
per shared-memory monitor update on its prototype).

Times ``ControlRecord.write`` (seqlock + CRC-32 + payload) and ``read`` in one process, then
reads while another process writes continuously (retries included). Median of 7 batches.

    .venv/bin/python bench/bench_control.py [n]
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path

from omniplane.control import ControlRecord, SlotState


def per_call(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    batches = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - t) / n)
    return statistics.median(batches) * 1e6


def writer(directory: str, stop: float) -> None:
    with ControlRecord.open("bench", slots=4, directory=Path(directory), create=False) as rec:
        k = 0
        while time.monotonic() < stop:
            k += 1
            rec.write(0, SlotState(pid=1, active=k, step=k, updated_ns=k, sm_level=k % 7, sm_count=64))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        rec = ControlRecord.open("bench", slots=4, directory=Path(d))
        state = SlotState(
            pid=1,
            active=3,
            step=10,
            updated_ns=time.monotonic_ns(),
            sm_level=7,
            sm_count=64,
            pressure=0.7,
            bw_util=0.7,
        )
        w = per_call(lambda: rec.write(0, state), n)
        r = per_call(lambda: rec.read(0), n)
        mk = per_call(lambda: rec.write(0, SlotState(1, 3, 10, time.monotonic_ns(), 7, 64, 0.7, 0.7)), n)
        ctx = mp.get_context("spawn")
        p = ctx.Process(target=writer, args=(d, time.monotonic() + 60))
        p.start()
        time.sleep(1.0)
        rc = per_call(lambda: rec.read(0), n)
        p.terminate()
        p.join()
        rec.close()
    print(f"control record ({n} calls x 7 batches, median per call):")
    print(f"  write (prepared state)            {w:7.2f} us")
    print(f"  write (state built per call)      {mk:7.2f} us")
    print(f"  read, no writer                   {r:7.2f} us")
    print(f"  read, another process writing     {rc:7.2f} us")
    print("  HorizonServe Table 4: 33 us (RTX 6000 Ada), 35 us (RTX PRO 6000) per monitor update")


if __name__ == "__main__":
    main()
