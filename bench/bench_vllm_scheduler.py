"""The wrapper's added cost per schedule() call, as a ratio to vLLM's bare Scheduler in the same run.

vLLM's real v1 Scheduler on CPU (the CPU build, .venv-vllm), synthetic model outputs, the same
seeded request stream for every variant:

- ``bare``: ``vllm.v1.core.sched.scheduler.Scheduler``;
- ``fcfs``: ``OmniplaneScheduler`` with the FCFS policy (the wrapper's fixed cost);
- ``half``: ``OmniplaneScheduler`` with a policy that reads every waiting request and hides half
  of them (the cost of building and applying a view), plus a control record in /dev/shm
  published every step;
- ``horizon``: ``OmniplaneScheduler`` with HorizonServe's policy as the live engine runs it
  (docs/results/fidelity.md, "HorizonServe inside a live vLLM": classes from ``priority``, no SM ladder,
  no sampler), on the tests' SLO table (``tests.vllm.harness.HORIZON_SLO_TABLE``: text 50 ms,
  audio 1 s, image 5 s; tight so that the slack guard and rotation act within a round).

The machine is shared and loaded, so times of separate runs differ by up to 2x. The ratio is
therefore taken inside each call: vLLM's own ``Scheduler.schedule`` (and
``update_from_output``) is timed where it is called, so for the wrapped variants "inner" is the
bare scheduler's share of the very same call and "outer - inner" is what the wrapper added.
Variants run in alternating rounds (the first rotating), garbage collector off while timing.

    .venv-vllm/bin/python bench/bench_vllm_scheduler.py [rounds] [requests]
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
try:
    import vllm
except ImportError:
    print("bench_vllm_scheduler: skipped: needs vLLM (run it with .venv-vllm/bin/python; make vllm-extra)")
    sys.exit(0)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.vllm.harness import (
    HORIZON_SLO_TABLE,
    make_config,
    make_request,
    make_scheduler,
    synthetic_output,
    write_model_dir,
)
from vllm.v1.core.sched.scheduler import Scheduler

from omniplane.policy import StepContext, StepDecision
from omniplane.vllm.scheduler import OmniplaneScheduler


class HideHalf:
    """Reads every waiting request's view and hides every other one."""

    name = "hide-half"

    def __init__(self, inputs: Any = None) -> None:
        pass

    def on_arrival(self, info: Any, now: float) -> None:
        return None

    def decide(self, ctx: StepContext) -> StepDecision:
        return StepDecision(
            hidden=frozenset(s.rid for i, s in enumerate(ctx.waiting) if i % 2 and not s.decoding)
        )

    def on_step(self, outcome: Any) -> None:
        return None

    def on_finish(self, rid: int, now: float) -> None:
        return None


def stream(n: int, seed: int) -> dict[int, list[Any]]:
    rng = random.Random(seed)
    reqs = [make_request(i, rng) for i in range(n)]
    return {s: reqs[s * 8 : (s + 1) * 8] for s in range(-(-n // 8))}


INNER: dict[str, list[float]] = {"schedule": [], "update": []}


def _time_inner() -> None:
    """Time vLLM's own Scheduler.schedule / update_from_output wherever they are called from:
    inside the wrapper this is the bare scheduler's share of the very same call."""
    for name, key in (("schedule", "schedule"), ("update_from_output", "update")):
        orig = getattr(Scheduler, name)

        def timed(self: Any, *a: Any, _orig: Any = orig, _key: str = key, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return _orig(self, *a, **k)
            finally:
                INNER[_key].append(time.perf_counter() - t)

        setattr(Scheduler, name, timed)


def one_round(sched: Any, arrivals: dict[int, list[Any]]) -> dict[str, list[float]]:
    """Run the stream through ``sched`` with the garbage collector off (its pauses land in no
    variant's calls); per call: outer (what the engine sees) and inner (vLLM's own) times."""
    rng = random.Random(0)
    out_t: dict[str, list[float]] = {"schedule": [], "update": [], "waiting": [], "running": []}
    for v in INNER.values():
        v.clear()
    step, last = 0, max(arrivals)
    gc.collect()
    gc.disable()
    try:
        while step <= last or sched.has_requests():
            for r in arrivals.get(step, []):
                sched.add_request(r)
            out_t["waiting"].append(len(sched.waiting))
            out_t["running"].append(len(sched.running))
            t0 = time.perf_counter()
            out = sched.schedule()
            t1 = time.perf_counter()
            mro = synthetic_output(sched, out, rng)
            t2 = time.perf_counter()
            sched.update_from_output(out, mro)
            t3 = time.perf_counter()
            out_t["schedule"].append(t1 - t0)
            out_t["update"].append(t3 - t2)
            step += 1
    finally:
        gc.enable()
    return {
        "waiting": out_t["waiting"],
        "running": out_t["running"],
        "schedule": out_t["schedule"],
        "schedule.inner": list(INNER["schedule"]),
        "update": out_t["update"],
        "update.inner": list(INNER["update"]),
    }


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    tmp = Path(tempfile.mkdtemp())
    config = make_config(write_model_dir(tmp / "model"), max_num_seqs=64, max_num_batched_tokens=2048)
    shm = tempfile.mkdtemp(dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
    variants = {
        "bare": lambda: make_scheduler(Scheduler, config, None, blocks=1024),
        "fcfs": lambda: make_scheduler(
            OmniplaneScheduler, config, {"policy": "fcfs", "sampler": "null"}, blocks=1024
        ),
        "half": lambda: make_scheduler(
            OmniplaneScheduler,
            config,
            {
                "policy": "import:__main__:HideHalf",
                "sampler": "null",
                "control": "bench",
                "control_dir": shm,
                "total_sms": 132,
            },
            blocks=1024,
        ),
        "horizon": lambda: make_scheduler(
            OmniplaneScheduler,
            config,
            {
                "policy": "horizon",
                "slo_table": HORIZON_SLO_TABLE,
                "default_class": "text",
                "class_source": "priority",
                "sampler": "null",
                "streams": "null",
            },
            blocks=1024,
        ),
    }
    _time_inner()
    order = list(variants)
    res: dict[str, dict[str, list[float]]] = {k: {} for k in variants}
    for r in range(rounds + 1):
        for k in order[r % len(order) :] + order[: r % len(order)]:  # rotate who runs first
            got = one_round(variants[k](), stream(n, seed=r))
            if r:  # round 0 warms up
                for key, v in got.items():
                    res[k].setdefault(key, []).extend(v)
    calls = len(res["bare"]["schedule"])
    print(
        f"vLLM {vllm.__version__} CPU scheduler, {n} requests per round (priorities 0/10/20), "
        f"max_num_seqs 64, {rounds} rounds, {calls} calls per variant; per call: whole call (outer) "
        "and vLLM's own Scheduler method inside it (inner), in the same call"
    )
    print(
        "| variant | call | outer median | inner median | added (outer - inner) median "
        "| total outer / total inner |"
    )
    print("|---|---|---|---|---|---|")
    for k, d in res.items():
        for call in ("schedule", "update"):
            o, i = d[call], d[f"{call}.inner"]
            added = statistics.median(a - b for a, b in zip(o, i, strict=True))
            print(
                f"| {k} | {call} | {statistics.median(o) * 1e6:.0f} us "
                f"| {statistics.median(i) * 1e6:.0f} us | {added * 1e6:.1f} us | {sum(o) / sum(i):.3f} |"
            )
    bare = statistics.median(res["bare"]["schedule"])
    fcfs, half, hz = (statistics.median(res[k]["schedule"]) / bare for k in ("fcfs", "half", "horizon"))
    for k, d in res.items():
        print(f"{k}: mean queue before schedule(): {statistics.fmean(d['waiting']):.0f} waiting, "
              f"{statistics.fmean(d['running']):.0f} running")
    print(f"across runs (noisier): median schedule() fcfs / bare = {fcfs:.3f}, half / bare = {half:.3f}, "
          f"horizon / bare = {hz:.3f}")


if __name__ == "__main__":
    main()
