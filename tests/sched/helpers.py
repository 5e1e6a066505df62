"""Small synthetic class profiles and a tiny FCFS engine that drives a policy step by step."""

from __future__ import annotations

from dataclasses import dataclass, field

from omniplane.policy import (
    PathClass,
    Policy,
    SeqInfo,
    StepContext,
    StepDecision,
    StepOutcome,
    visible_waiting,
)
from omniplane.sched.ladder import Ladder, partition_rule
from omniplane.sched.profiler import ClassProfile

SHORT = ClassProfile("text", PathClass.SHORT, slo_s=0.2, prefill_s_per_token=1e-4, step_s=0.02,
                     decode_s_per_token=0.02, decode_tokens=0.0, downstream_s=0.0)
LONG = ClassProfile("speech", PathClass.LONG, slo_s=20.0, prefill_s_per_token=1e-4, step_s=0.02,
                    decode_s_per_token=0.02, decode_tokens=50.0, downstream_s=2.0)
PROFILES = {"text": SHORT, "speech": LONG}
LADDER = Ladder(142, (56, 60, 66, 70), partition_rule(8, 9))  # RTX 6000 Ada's calibrated ladder


@dataclass
class Seq:
    rid: int
    type: str
    arrival: float
    prompt: int
    out: int
    computed: int = 0
    generated: int = 0

    def info(self) -> SeqInfo:
        return SeqInfo(self.rid, self.type, self.arrival, self.prompt, self.computed, self.out,
                       self.generated)


@dataclass
class StepLog:
    now: float
    waiting_before: list[int]
    waiting_after: list[int]
    admitted: list[int]
    decision: StepDecision
    ctx: StepContext


@dataclass
class TinyEngine:
    """FCFS continuous batching (like the simulator's LLM engine): each step admits visible
    waiting requests in order while there is room, prefills them whole, decodes the running ones
    one token each; ``step_s`` per step. Preemption puts the newest running request back at the
    front of the queue (a decode continuation), every ``preempt_every`` steps when set."""

    policy: Policy
    max_batch: int = 4
    step_s: float = 0.03
    preempt_every: int = 0
    downstream: list[int] = field(default_factory=list)  # downstream_active per step (cycled)
    bw: list[float] = field(default_factory=list)
    now: float = 0.0
    waiting: list[Seq] = field(default_factory=list)
    running: list[Seq] = field(default_factory=list)
    steps: list[StepLog] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)

    def arrive(self, seq: Seq) -> None:
        self.waiting.append(seq)
        self.policy.on_arrival(seq.info(), self.now)

    def step(self) -> None:
        k = len(self.steps)
        ds = self.downstream[k % len(self.downstream)] if self.downstream else 0
        bw = self.bw[k % len(self.bw)] if self.bw else 0.5
        ctx = StepContext(self.now, k, [s.info() for s in self.waiting], [s.info() for s in self.running],
                          ds, bw, 142)
        before = [s.rid for s in self.waiting]
        decision = self.policy.decide(ctx)
        visible = visible_waiting(ctx.waiting, decision)
        room = self.max_batch - len(self.running)
        take = {s.rid for s in visible[:max(0, room)]}
        admitted = [s for s in self.waiting if s.rid in take]
        self.waiting = [s for s in self.waiting if s.rid not in take]
        first = []
        for s in self.running:
            s.generated += 1
        for s in admitted:
            s.computed, s.generated = s.prompt, s.generated + 1
            first.append(s.rid)
        self.running.extend(admitted)
        self.now += self.step_s
        done = [s for s in self.running if s.generated >= s.out]
        self.running = [s for s in self.running if s.generated < s.out]
        self.policy.on_step(StepOutcome(self.now, self.step_s, tuple(s.rid for s in admitted),
                                        tuple(first), decision.sm_cap))
        for s in done:
            self.finished.append(s.rid)
            self.policy.on_finish(s.rid, self.now)
        if self.preempt_every and k % self.preempt_every == self.preempt_every - 1 and self.running:
            victim = self.running.pop()
            victim.computed = 0  # recompute; its generated tokens make it a continuation
            self.waiting.insert(0, victim)
        self.steps.append(StepLog(ctx.now, before, [s.rid for s in self.waiting],
                                  [s.rid for s in admitted], decision, ctx))
