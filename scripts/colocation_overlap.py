"""Two memory-bound streams on one GPU under MPS, the second started ``--offset-ms`` after the first:
the DRAM bandwidth they draw together, over what the DRAM serves (``C``), for
docs/reference/perf.md ("Co-location").

    .venv/bin/python scripts/colocation_overlap.py [--gpu A100-80GB] [--gb 20] [--offset-ms 5]

``start-time`` is the timing before steps were re-timed in flight (each step kept the time it
started with, next to the other's draw at that moment); ``re-timed`` is the simulator's GPU slot
(``omniplane.sim.gpu.Colocated``), which shares the DRAM afresh whenever a step's GPU phase starts
or ends.
"""

from __future__ import annotations

import argparse

from omniplane.perf import Work
from omniplane.perf.colocation import ColocationModel
from omniplane.perf.factors import load_calibration
from omniplane.sim.engines import Step
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.gpu import Colocated
from omniplane.spec import load_gpus


class _Stage:
    """One step on the shared GPU, started at ``t0`` (what an executor does with it)."""

    def __init__(self, loop: EventLoop, slot: Colocated, name: str, t0: float, step: Step) -> None:
        self.loop, self.gpu, self.name, self.step = loop, slot, name, step
        self.version, self.took, self.t0 = 0, 0.0, t0
        loop.at(t0, self._start)

    def _start(self, _: object = None) -> None:
        self.move_end(self.t0 + self.gpu.begin(self, self.step))  # type: ignore[arg-type]

    def move_end(self, end: float) -> None:
        self.version += 1
        self.loop.at(end, self._end, self.version)

    def _end(self, version: int) -> None:
        if version == self.version:
            self.gpu.end(self)  # type: ignore[arg-type]
            self.took = self.loop.now - self.t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="A100-80GB")
    ap.add_argument("--gb", type=float, default=20.0, help="bytes each stream moves, GB")
    ap.add_argument("--offset-ms", type=float, default=5.0)
    args = ap.parse_args()
    gpu = load_gpus().get(args.gpu)
    model, eff = ColocationModel(), load_calibration().for_gpu(gpu)
    work, cap = Work(0.0, args.gb * 1e9), model.capacity(gpu)
    first = model.stage(work, gpu, gpu.sms, eff=eff)
    second = model.stage(work, gpu, gpu.sms, first.bandwidth, eff=eff)
    print(f"{gpu.name}, two {args.gb:g} GB streams under MPS, {args.offset_ms:g} ms apart; "
          f"C = {cap / 1e9:.0f} GB/s")
    print(f"start-time: {first.bandwidth / 1e9:.0f} + {second.bandwidth / 1e9:.0f} GB/s while both run = "
          f"{(first.bandwidth + second.bandwidth) / cap:.3f} C")
    loop, trace = EventLoop(), []  # type: ignore[var-annotated]
    slot = Colocated("mps", gpu, eff, model, "s0", trace)
    step = Step(first.time_s, 1, "step", work=work)
    a = _Stage(loop, slot, "s0", 0.0, step)
    b = _Stage(loop, slot, "s1", args.offset_ms / 1e3, step)
    loop.run()
    most = max(bw for _, bw, _ in trace)
    print(f"re-timed:   at most {most / 1e9:.0f} GB/s together = {most / cap:.3f} C; "
          f"alone {first.time_s * 1e3:.2f} ms, "
          f"first {a.took * 1e3:.2f} ms, second {b.took * 1e3:.2f} ms, both done at {loop.now * 1e3:.2f} ms "
          f"({2 * args.gb:g} GB at C: {2 * work.bytes / cap * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
