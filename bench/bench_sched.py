"""HorizonServe's runtime overheads (the paper's Table 4), per request and per step.

    .venv/bin/python bench/bench_sched.py

* request annotation: ``on_arrival`` (class, deadline, r_hat, slack, protected bit, queueing
  into the temporal scheduler's structures), per request; the profiler's ``annotate`` alone too;
* one scheduling-view step: ``decide`` with 64, 256 and 1024 waiting requests (half short-path,
  half long-path, a quarter of the short ones protected), SM-cap selection included, as the
  engine calls it every iteration; and the view built without the spatial part;
* SM-cap selection alone: ``observe`` + ``select`` of the spatial controller (and ``decide``,
  which also builds the recorded decision);
* for reference, the engine's side of applying a view (``visible_waiting``) and EDF's ``decide``.

Each figure is the best of ``REPEATS`` timings of ``LOOPS`` calls, in CPU time of this process
(``time.process_time``: time spent descheduled on the shared machine is not counted; the best
run is the least disturbed by other processes). Prints figures; never part of make test.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable

from omniplane.policy import PathClass, SeqInfo, StepContext, StepOutcome, visible_waiting
from omniplane.sched.baselines import EDF
from omniplane.sched.horizon import HorizonServe
from omniplane.sched.ladder import Ladder, partition_rule
from omniplane.sched.profiler import ClassProfile, RequestProfiler
from omniplane.sched.spatial import SpatialController
from omniplane.sched.temporal import TemporalScheduler

REPEATS = 7
LOOPS = 20_000
PAPER = {"annotation": 0.4, "view": 1.0, "smcap": 0.3}  # us, HorizonServe Table 4 (RTX 6000 Ada)

SHORT = ClassProfile("t2t", PathClass.SHORT, 0.115, 2e-5, 0.023, 0.023, 0.0, 0.0)
LONG = ClassProfile("t2a", PathClass.LONG, 46.0, 2e-5, 0.023, 0.023, 115.0, 2.5)
PROFILES = {"t2t": SHORT, "t2a": LONG}
LADDER = Ladder(142, (56, 60, 66, 70), partition_rule(8, 9))  # RTX 6000 Ada's calibrated ladder


def best_us(fn: Callable[[], object], loops: int = LOOPS) -> float:
    times = []
    for _ in range(REPEATS):
        t = time.process_time()
        for _ in range(loops):
            fn()
        times.append((time.process_time() - t) / loops)
    return min(times) * 1e6


def infos(n: int) -> list[SeqInfo]:
    return [SeqInfo(i, "t2t" if i % 2 else "t2a", 0.001 * i, 80 + i % 300, 0, 96, 0) for i in range(n)]


def loaded_policy(n: int) -> tuple[HorizonServe, StepContext]:
    pol = HorizonServe(PROFILES, LADDER)
    waiting = infos(n)
    for k, s in enumerate(waiting):
        # a quarter of the short-path ones arrived long enough ago to be protected
        arrival = -10.0 if (s.type == "t2t" and k % 4 == 1) else s.arrival
        pol.on_arrival(SeqInfo(s.rid, s.type, arrival, s.prompt_tokens, 0, 96, 0), 0.0)
    running = [SeqInfo(10_000 + i, "t2t", 0.0, 80, 80, 96, 5) for i in range(8)]
    ctx = StepContext(0.05, 0, waiting, running, 2, 0.9, 142)
    pol.decide(ctx)  # pops the protection timers once
    return pol, ctx


def main() -> None:
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.processor() or 'cpu'}; "
          f"best of {REPEATS} x {LOOPS} calls")
    prof = RequestProfiler(PROFILES)
    batch = infos(1024)
    k = [0]

    def annotate() -> object:
        k[0] = (k[0] + 1) & 1023
        return prof.annotate(batch[k[0]], 0.5)

    ann = best_us(annotate)
    pol, _ = loaded_policy(64)  # arrivals join a queue of 64 waiting requests, then leave again
    rid = [100_000]

    def arrive() -> None:
        rid[0] += 1
        pol.on_arrival(SeqInfo(rid[0], "t2a", 0.0, 100, 0, 96, 0), 0.0)

    def arrive_leave() -> None:
        arrive()
        pol.on_finish(rid[0], 0.0)

    def leave_only() -> None:  # the finish of an unknown request: the bookkeeping's lookup alone
        pol.on_finish(-1, 0.0)

    pair = best_us(arrive_leave)
    print(f"request annotation: profiler {ann:.2f} us/request; on_arrival + on_finish (annotate, queue, "
          f"dequeue) {pair:.2f} us/request, {pair - best_us(leave_only):.2f} us without the finish's "
          f"lookup; paper {PAPER['annotation']} us/request")

    spatial = SpatialController(LADDER)
    flip = [0]

    def smcap() -> object:
        flip[0] ^= 1
        spatial.observe(0.8 + 0.1 * flip[0])
        return spatial.select(flip[0])

    def smdecision() -> object:
        flip[0] ^= 1
        spatial.observe(0.8 + 0.1 * flip[0])
        return spatial.decide(flip[0])

    sm = best_us(smcap)
    print(f"SM-cap selection: {sm:.2f} us/step (observe + select, the per-step path); "
          f"{best_us(smdecision):.2f} us/step building the whole SpatialDecision (when recording); "
          f"paper {PAPER['smcap']} us/step")

    steps: dict[int, float] = {}
    churn: dict[int, float] = {}
    rebuild: dict[int, float] = {}
    for n in (64, 256, 1024):
        pol, ctx = loaded_policy(n)
        steps[n] = best_us(lambda pol=pol, ctx=ctx: pol.decide(ctx), loops=LOOPS // 4)
        # a step in which the queue changed: one waiting request admitted and finished, one arrived
        # (costs annotation + bookkeeping + rebuilding the hidden set)
        def changed(pol: HorizonServe = pol, ctx: StepContext = ctx, n: int = n,
                    rid: list[int] = [0]) -> object:  # noqa: B006 - a counter kept across calls
            r = rid[0] = (rid[0] + 2) % n
            pol.on_step(StepOutcome(0.05, 0.0, (r,), (r,), None))
            pol.on_finish(r, 0.05)
            pol.on_arrival(SeqInfo(r, "t2a", 0.0, 100, 0, 96, 0), 0.05)
            return pol.decide(ctx)

        def changes_only(pol: HorizonServe = pol, n: int = n, rid: list[int] = [0]) -> None:  # noqa: B006
            r = rid[0] = (rid[0] + 2) % n
            pol.on_step(StepOutcome(0.05, 0.0, (r,), (r,), None))
            pol.on_finish(r, 0.05)
            pol.on_arrival(SeqInfo(r, "t2a", 0.0, 100, 0, 96, 0), 0.05)

        churn[n] = best_us(changed, loops=LOOPS // 20) - best_us(changes_only, loops=LOOPS // 20)

        # the rebuild alone: mark the waiting set changed (what any arrival or admission does)
        # without changing it, so no bookkeeping cost has to be subtracted
        def invalidate(t: TemporalScheduler = pol.temporal) -> None:
            t._version += 1

        def rebuilt(pol: HorizonServe = pol, ctx: StepContext = ctx) -> object:
            pol.temporal._version += 1
            return pol.decide(ctx)

        rebuild[n] = best_us(rebuilt, loops=LOOPS // 4) - best_us(invalidate, loops=LOOPS // 4)
        decision = pol.decide(ctx)
        apply = best_us(lambda ctx=ctx, d=decision: visible_waiting(ctx.waiting, d), loops=LOOPS // 20)
        edf = EDF({"t2t": 0.115, "t2a": 46.0})
        for s in ctx.waiting:
            edf.on_arrival(s, 0.0)
        edf_us = best_us(lambda edf=edf, ctx=ctx: edf.decide(ctx), loops=LOOPS // 4)
        hidden = len(decision.hidden)
        print(f"{n:5d} waiting ({hidden} hidden): decide {steps[n]:.2f} us/step unchanged queue, "
              f"{churn[n]:.2f} us/step right after one left and one arrived, {rebuild[n]:.2f} us/step with "
              f"the view rebuilt (forced); engine applying the view "
              f"{apply:.1f} us; EDF decide {edf_us:.1f} us")
    print(f"growth, unchanged queue: 256/64 = {steps[256] / steps[64]:.2f}x, 1024/64 = "
          f"{steps[1024] / steps[64]:.2f}x; view rebuilt: 256/64 = {rebuild[256] / rebuild[64]:.2f}x, "
          f"1024/64 = {rebuild[1024] / rebuild[64]:.2f}x; "
          f"changed queue: 256/64 = {churn[256] / churn[64]:.2f}x, "
          f"1024/64 = {churn[1024] / churn[64]:.2f}x (waiting grows 4x, 16x); paper {PAPER['view']} us/step")
    base = best_us(lambda: None)
    print(f"reference: an empty Python call takes {base:.3f} us here")

if __name__ == "__main__":
    main()
