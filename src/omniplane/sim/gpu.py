"""GPUs shared by co-located executors (HorizonServe 3.3); an executor on its own GPUs has none.

Sharing modes for executors on one GPU:

``timeslice``  no MPS (CUDA's default compute mode, vLLM-Omni's stages as separate processes):
               kernels of different processes never run at the same instant; the GPU's kernel
               time is shared between the stages that have kernels pending, and a stage's host
               and launch time leaves the GPU to the others (:class:`TimeSliced`).
``mps``        steps run concurrently without SM limits (NVIDIA MPS); the stages in their GPU
               phases share DRAM bandwidth and compute by the co-location model, re-timed
               whenever one enters or leaves its GPU phase (:class:`Colocated`).
``split``      steps run concurrently on an explicit SM split: the shared stage's SM cap comes
               from its policy each step, the other stage gets the rest; DRAM is shared as
               under MPS, compute only where the allocations overlap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omniplane.perf.types import Work
from omniplane.sim.engines import Step
from omniplane.sim.eventloop import COMPLETE

if TYPE_CHECKING:
    from omniplane.sim.executor import Executor


def split_step(step: Step) -> tuple[float, float]:
    """A step's (host, GPU) seconds alone: the host part is the runtime's host- and launch-side
    time (``work.overhead_s``: scheduling, sampling, kernel launches, hand-offs; see
    :mod:`omniplane.perf.runtime`), the GPU part the rest of its solo time (kernels, and
    collectives at TP > 1). A step that reports no work counts as all GPU time."""
    d = max(step.duration, 0.0)
    work = step.work
    host = min(max(float(work.overhead_s), 0.0), d) if work is not None else 0.0
    return host, d - host


class TimeSliced:
    """Stages in separate processes on one GPU without MPS.

    What the hardware does: kernels from different CUDA contexts never run at the same
    instant; the GPU runs one context's work and switches to another when that one is idle or
    its time slice ends (NVIDIA leaves the inter-context schedule unspecified). Each step here
    is a host phase (:func:`split_step`), during which the stage launches and waits on the CPU
    and the GPU is free for the others, then a GPU phase. The stages in their GPU phases share
    the GPU's time equally (processor sharing: the fluid limit of round-robin time slices; the
    slice length and the context-switch cost are not modelled), each at its solo speed while
    it holds the GPU. Hence, by construction:

    * a stage alone takes exactly its solo time, and never less when another stage runs;
    * the stages' GPU shares sum to at most 1, so the GPU's kernel time, and with it the DRAM
      bandwidth and FLOP/s the stages draw together, never exceeds one stage's solo rate.

    When a stage enters or leaves its GPU phase, the shares change and the ends of the steps
    in flight move (:meth:`Executor.move_end`). ``utilization`` is the GPU's DRAM draw over its
    peak at the last change (NVML-like signal) when the GPU kind is known; ``trace``, when a
    list, receives ``(time, GPU share in use, DRAM bytes/s, FLOP/s)`` drawn from then on, at
    every change.
    """

    def __init__(self, gpu: Any = None, trace: list[tuple[float, float, float, float]] | None = None) -> None:
        self.members: list[Executor] = []
        self.mem_bw = float(gpu.mem_bw) if gpu is not None else 0.0
        self.trace = trace
        self.utilization = 0.0
        self._remaining: dict[Executor, float] = {}  # in the GPU phase: solo GPU seconds left
        self._draw: dict[Executor, tuple[float, float]] = {}  # bytes, FLOPs per GPU second, in flight
        self._gpu_s: dict[Executor, float] = {}  # GPU seconds of the step in flight
        self._t = 0.0  # when ``_remaining`` was last brought up to date

    def join(self, ex: Executor) -> None:
        self.members.append(ex)

    def can_start(self, ex: Executor) -> bool:
        return True

    def begin(self, ex: Executor, step: Step) -> float:
        now = ex.loop.now
        host, gpu_s = split_step(step)
        self._gpu_s[ex] = gpu_s
        work = step.work
        if work is not None and gpu_s > 0.0:
            self._draw[ex] = (float(work.bytes) / gpu_s, float(work.flops) / gpu_s)
        else:
            self._draw[ex] = (0.0, 0.0)
        if gpu_s <= 0.0:
            return host
        if host > 0.0:
            ex.loop.at(now + host, self._enter, ex, COMPLETE)
            return host + gpu_s  # moved when it enters its GPU phase if the GPU is shared then
        self._advance(now)
        self._remaining[ex] = gpu_s
        self._moved(now, skip=ex)
        return gpu_s * len(self._remaining)

    def _enter(self, ex: Executor) -> None:
        """``ex``'s host phase is over: its kernels join the GPU."""
        now = ex.loop.now
        self._advance(now)
        self._remaining[ex] = self._gpu_s[ex]
        if len(self._remaining) > 1:
            self._moved(now)
        else:
            self._note(now)

    def end(self, ex: Executor) -> None:
        now = ex.loop.now
        self._advance(now)
        self._gpu_s.pop(ex, None)
        self._draw.pop(ex, None)
        if self._remaining.pop(ex, None) is not None:
            self._moved(now)

    def after_end(self, ex: Executor) -> None:
        ex.kick()

    def _advance(self, now: float) -> None:
        n = len(self._remaining)
        if n and now > self._t:
            done = (now - self._t) / n
            for o in self._remaining:
                self._remaining[o] = max(self._remaining[o] - done, 0.0)
        self._t = now

    def _moved(self, now: float, skip: Executor | None = None) -> None:
        """Shares changed at ``now``: every step in its GPU phase (but ``skip``) ends anew."""
        n = len(self._remaining)
        for o, left in self._remaining.items():
            if o is not skip:
                o.move_end(now + left * n)
        self._note(now)

    def _note(self, now: float) -> None:
        n = len(self._remaining)
        bw = sum(self._draw[o][0] for o in self._remaining) / n if n else 0.0
        if self.mem_bw > 0:
            self.utilization = min(1.0, bw / self.mem_bw)
        if self.trace is not None:
            flops = sum(self._draw[o][1] for o in self._remaining) / n if n else 0.0
            self.trace.append((now, 1.0 if n else 0.0, bw, flops))


class Flight:
    """A step of a co-located stage in flight: its fixed part (``host_s``: the runtime's host and
    launch time, as in :func:`split_step`, plus any collectives, which the co-location model
    prices as fixed time; neither pulls DRAM nor computes on the shared SMs) comes first, then
    its GPU phase (the step's FLOPs and bytes on ``sms`` SMs), which takes ``gpu_s`` alone and
    ``now_s`` next to the current co-runners."""

    __slots__ = ("bw", "flops", "gpu_phase", "gpu_s", "host_s", "left", "now_s", "sms", "solo_s", "work")

    def __init__(self, work: Work, sms: int, host_s: float, alone: Any) -> None:
        self.work = work  # the GPU phase's work (no overhead, no collectives)
        self.sms = sms
        self.host_s = host_s
        self.gpu_s = float(alone.time_s)
        self.solo_s = host_s + self.gpu_s  # the whole step alone on its SMs
        self.bw = float(alone.demand) if work.bytes else 0.0  # DRAM it asks for (uncontended pull)
        self.flops = float(alone.flops_rate)  # FLOP/s it asks for
        self.left = 1.0  # fraction of the GPU phase still to run
        self.now_s = self.gpu_s  # GPU-phase time at the current sharing
        self.gpu_phase = False


class Colocated:
    """Stages running steps concurrently on one GPU (``mps`` or ``split``).

    Each step is a host phase (the runtime's host and launch time, and collectives: no DRAM
    traffic or compute on the shared SMs), then a GPU phase: its FLOPs and bytes on its SMs.
    The stages in their GPU phases share the DRAM (and, under MPS or where an SM split's
    allocations overlap, compute) as :meth:`~omniplane.perf.colocation.ColocationModel.pair`
    does: each stage is told the others' uncontended demand, so together they never draw more
    than the DRAM serves (``C``) nor compute more than the GPU's peak. Whenever a stage enters
    or leaves its GPU phase, the steps in flight are re-timed from the fraction of their GPU
    phase they have left (fluid sharing; :meth:`Executor.move_end`); a stage in its host phase
    draws nothing, so it costs the others nothing. Hence a stage alone takes its solo time on
    its SMs, and none is faster next to others.

    In ``split`` mode the shared stage runs on the SM cap its policy chose for the step and the
    other stage on the complement (HorizonServe's complementary green-context ladders); a step
    keeps its SMs until it ends. In ``mps`` mode every stage may use every SM.

    ``utilization`` is the signal the controller reads at a step's start (a sample at the
    scheduling boundary): the model's utilisation for the step about to run next to the draw
    the co-runners' steps reported when they started. ``colocation`` may be a signal wrapper
    that replaces that utilisation (``sched.memsignal.MemoryActivity``, NVML-style): such a
    wrapper exposes the physical model as ``inner``, receives exactly one call per step (at
    its start), and the re-timing prices with ``inner``. ``trace``, when a list, receives
    ``(time, DRAM bytes/s, FLOP/s)`` drawn from then on, at every change.
    """

    def __init__(self, mode: str, gpu: Any, eff: Any, colocation: Any, shared_stage: str,
                 trace: list[tuple[float, float, float]] | None = None) -> None:
        if mode not in ("mps", "split"):
            raise ValueError(f"co-location mode must be 'mps' or 'split', got {mode!r}")
        self.mode = mode
        self.gpu = gpu
        self.eff = eff
        self.model = colocation  # the step-start signal (and, unwrapped, the physics)
        self.physics = getattr(colocation, "inner", colocation)
        self.shared_stage = shared_stage  # name of the shared-stage executor
        self.total = int(gpu.sms)
        self.cap = self.total  # the shared stage's current SM cap
        self.running: dict[str, float] = {}  # executor name -> draw its step reported at its start
        self.utilization = 0.0  # DRAM busy fraction (NVML-like signal) at the last step start
        self.log: list[tuple[float, int, float]] = []  # (time, shared-stage SMs, utilisation)
        self.trace = trace
        self.flight: dict[Executor, Flight] = {}  # steps in flight, either phase
        self._t = 0.0  # when the GPU phases' ``left`` were last brought up to date

    def can_start(self, ex: Executor) -> bool:
        return True

    def sms_for(self, ex: Executor, step: Step) -> int:
        if self.mode == "mps":
            return self.total
        if ex.name == self.shared_stage:
            if step.sm_cap is not None:
                self.cap = max(1, min(self.total, step.sm_cap))
            return self.cap
        if self.cap >= self.total and self.shared_stage not in self.running:
            # The complementary ladder has no 0-SM level: a shared stage on the whole GPU
            # (HorizonServe's S_aggr = S_tot while no downstream is active) publishes its next
            # cap at its next step; while it is idle nothing holds the SMs. (Before this, such a
            # step ran on 1 SM, about 100x its solo time, at every downstream activation.)
            return self.total
        return max(1, self.total - self.cap)

    def begin(self, ex: Executor, step: Step) -> float:
        sms = self.sms_for(ex, step)
        now = ex.loop.now
        work = step.work
        other = sum(bw for name, bw in self.running.items() if name != ex.name)
        if work is None:  # nothing to share by: the step keeps its solo time and draws nothing
            self.running[ex.name] = 0.0
            return step.duration
        signal = self.model.stage(work, self.gpu, sms, other, eff=self.eff)
        self.running[ex.name] = signal.bandwidth
        self.utilization = signal.utilization
        if ex.name == self.shared_stage:
            self.log.append((now, sms, signal.utilization))
        gpu_work = Work(float(work.flops), float(work.bytes))
        host = max(float(work.overhead_s), 0.0) + max(float(work.comm_s), 0.0)
        f = Flight(gpu_work, sms, host, self.physics.stage(gpu_work, self.gpu, sms, eff=self.eff))
        self.flight[ex] = f
        if f.gpu_s <= 0.0:
            return host
        if host > 0.0:
            ex.loop.at(now + host, self._enter, ex, COMPLETE)
            return f.solo_s  # re-timed when it enters its GPU phase if others are in theirs
        self._advance(now)
        f.gpu_phase = True
        self._retime(now, skip=ex)
        return f.now_s

    def _enter(self, ex: Executor) -> None:
        """``ex``'s host phase is over: its kernels join the GPU."""
        f = self.flight.get(ex)
        if f is None or f.gpu_phase:
            return
        now = ex.loop.now
        self._advance(now)
        f.gpu_phase = True
        self._retime(now)

    def end(self, ex: Executor) -> None:
        self.running.pop(ex.name, None)
        f = self.flight.pop(ex, None)
        if f is not None and f.gpu_phase:
            now = ex.loop.now
            self._advance(now)
            self._retime(now)

    def after_end(self, ex: Executor) -> None:
        ex.kick()

    def _advance(self, now: float) -> None:
        dt = now - self._t
        if dt > 0.0:
            for f in self.flight.values():
                if f.gpu_phase and f.now_s > 0.0:
                    f.left = max(f.left - dt / f.now_s, 0.0)
        self._t = now

    def _retime(self, now: float, skip: Executor | None = None) -> None:
        """The set of GPU phases changed at ``now``: each is timed next to the others' demand,
        and every one whose time changed (but ``skip``, which :meth:`begin` returns) ends anew."""
        on = [(ex, f) for ex, f in self.flight.items() if f.gpu_phase]
        bw = sum(f.bw for _, f in on)
        flops = sum(f.flops for _, f in on)
        # MPS shares every SM; an SM split shares compute only where allocations overlap (the
        # shared stage took a larger cap while a downstream step still runs on the old complement)
        shared = self.mode == "mps" or sum(f.sms for _, f in on) > self.total
        drawn_bw = drawn_flops = 0.0
        for ex, f in on:
            if len(on) == 1:
                t = f.gpu_s
            else:
                t = float(self.physics.stage(f.work, self.gpu, f.sms, bw - f.bw, eff=self.eff,
                                             corun_flops=flops - f.flops if shared else 0.0).time_s)
            if t != f.now_s or ex is skip:
                f.now_s = t
                if ex is not skip:
                    ex.move_end(now + f.left * t)
            if t > 0.0:
                drawn_bw += f.work.bytes / t
                drawn_flops += f.work.flops / t
        if self.trace is not None:
            self.trace.append((now, drawn_bw, drawn_flops))
