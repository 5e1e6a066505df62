"""GPUs shared by co-located executors (HorizonServe 3.3); an executor on its own GPUs has none.

Sharing modes for executors on one GPU:

``timeslice``  one step at a time on the whole GPU; a stage that wants to run while the other
               runs waits for it (FIFO). Steps take their solo time.
``mps``        steps run concurrently without SM limits (NVIDIA MPS); each step's time comes
               from the co-location model given what the other stage is doing.
``split``      steps run concurrently on an explicit SM split: the shared stage's SM cap comes
               from its policy each step, the other stage gets the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from omniplane.sim.engines import Step

if TYPE_CHECKING:
    from omniplane.sim.executor import Executor


class GPUSlot(Protocol):
    def can_start(self, ex: Executor) -> bool: ...

    def begin(self, ex: Executor, step: Step) -> float: ...

    def end(self, ex: Executor) -> None: ...

    def after_end(self, ex: Executor) -> None: ...


class TimeSliced:
    """One step at a time. When a step ends, the other stages get the first chance to start
    (in turn), then the one that just ran: the stages alternate while all have work."""

    def __init__(self) -> None:
        self.holder: Executor | None = None
        self.members: list[Executor] = []

    def join(self, ex: Executor) -> None:
        self.members.append(ex)

    def can_start(self, ex: Executor) -> bool:
        return self.holder is None

    def begin(self, ex: Executor, step: Step) -> float:
        self.holder = ex
        return step.duration

    def end(self, ex: Executor) -> None:
        self.holder = None

    def after_end(self, ex: Executor) -> None:
        i = self.members.index(ex)
        for other in self.members[i + 1:] + self.members[:i]:
            other.kick()
        ex.kick()


class Colocated:
    """Two stages running steps concurrently on one GPU (``mps`` or ``split``).

    A step's time comes from the co-location model at the moment it starts: the stage's
    roofline work on its SMs next to the other stage's current bandwidth draw. In ``split``
    mode the shared stage runs on the SM cap its policy chose for the step and the other stage
    on the complement (HorizonServe's complementary green-context ladders); in ``mps`` mode
    both may use every SM, so each adds the DRAM pressure of a full allocation.
    """

    def __init__(self, mode: str, gpu: Any, eff: Any, colocation: Any, shared_stage: str) -> None:
        if mode not in ("mps", "split"):
            raise ValueError(f"co-location mode must be 'mps' or 'split', got {mode!r}")
        self.mode = mode
        self.gpu = gpu
        self.eff = eff
        self.model = colocation
        self.shared_stage = shared_stage  # name of the shared-stage executor
        self.total = int(gpu.sms)
        self.cap = self.total  # the shared stage's current SM cap
        self.running: dict[str, float] = {}  # executor name -> bandwidth it draws now
        self.utilization = 0.0  # DRAM busy fraction (NVML-like signal) at the last step start
        self.log: list[tuple[float, int, float]] = []  # (time, shared-stage SMs, utilisation)

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
        other = sum(bw for name, bw in self.running.items() if name != ex.name)
        timing = self.model.stage(step.work, self.gpu, sms, other, eff=self.eff)
        self.running[ex.name] = timing.bandwidth
        self.utilization = timing.utilization  # DRAM busy fraction with the co-runner
        if ex.name == self.shared_stage:
            self.log.append((ex.loop.now, sms, timing.utilization))
        return float(timing.time_s)

    def end(self, ex: Executor) -> None:
        self.running.pop(ex.name, None)

    def after_end(self, ex: Executor) -> None:
        ex.kick()
