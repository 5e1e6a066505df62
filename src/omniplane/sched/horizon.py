"""HorizonServe: one scheduling step (Algorithm 1) over the request profiler, the temporal
scheduler and the spatial controller, as a plain :class:`omniplane.policy.Policy`.

The same object runs in the simulator and inside vLLM's scheduler (sched.serving): it sees only
:class:`~omniplane.policy.SeqInfo` / :class:`~omniplane.policy.StepContext` and its own
state. Per step (``decide``):

1. *Refresh signals*: waiting requests whose slack ratio fell below ``u_guard`` become
   protected; the memory-activity sample ``B(t)`` (``ctx.bw_util``) updates ``B_hat``.
2. *Build the temporal view*: ``N`` from the protected short-path fraction, the phase, hidden
   ordinary non-phase prefills, the long-path cap (the base scheduler's FCFS order is kept).
3. *Select the SM split*: Equation 1 with hysteresis; ``s_down = S_tot - s_shared``.
4. *Execute and publish*: the engine runs the batch on the cap and restores the hidden requests
   (they were only hidden from its view); ``on_step`` publishes admissions, ``on_finish``
   completions.

If every waiting request is hidden while nothing runs, the step would be empty; vLLM's engine
loop would call the scheduler again at once, advancing the rotation, so ``decide`` does the same
(at most one cycle) instead of idling the stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from omniplane.policy import SeqInfo, StepContext, StepDecision, StepOutcome
from omniplane.sched.ladder import Ladder
from omniplane.sched.profiler import ClassProfile, ProfilerConfig, RequestProfiler
from omniplane.sched.spatial import SpatialConfig, SpatialController, SpatialDecision
from omniplane.sched.temporal import RotationConfig, TemporalScheduler, TemporalView


@dataclass(frozen=True)
class HorizonConfig:
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)
    rotation: RotationConfig = field(default_factory=RotationConfig)
    spatial: SpatialConfig = field(default_factory=SpatialConfig)


@dataclass(slots=True)
class HorizonStep:
    """What one step decided (kept only when recording, for Figure 10 and the tests)."""

    now: float
    view: TemporalView
    spatial: SpatialDecision
    downstream_active: int
    bw_util: float


class HorizonServe:
    """The HorizonServe policy (section 4, Algorithm 1)."""

    def __init__(self, profiles: Mapping[str, ClassProfile], ladder: Ladder,
                 config: HorizonConfig | None = None, *, name: str = "horizon", record: bool = False) -> None:
        self.name = name
        self.config = config or HorizonConfig()
        self.profiler = RequestProfiler(profiles, self.config.profiler)
        self.temporal = TemporalScheduler(self.config.rotation)
        self.spatial = SpatialController(ladder, self.config.spatial)
        self.history: list[HorizonStep] | None = [] if record else None
        self._last = StepDecision()  # reused while the hidden set and the cap do not change

    def on_arrival(self, info: SeqInfo, now: float) -> None:
        self.temporal.add(self.profiler.annotate(info, now))

    def decide(self, ctx: StepContext) -> StepDecision:
        # step 1: refresh signals (and reconcile with the engine's live requests)
        if ctx.running or self.temporal.long_running():
            self.temporal.sync({s.rid for s in ctx.running}, (s.rid for s in ctx.waiting))
        self.temporal.refresh(ctx.now)
        self.spatial.observe(ctx.bw_util)
        # step 2: the temporal view (re-polled while it would leave an idle stage empty)
        view = self.temporal.view()
        if not ctx.running and view.hidden and ctx.waiting:
            for _ in range(self.config.rotation.n_max + self.config.rotation.m):
                if any(s.rid not in view.hidden for s in ctx.waiting):
                    break
                view = self.temporal.view()
        # step 3: the SM split (the whole decision only when recording: building it per step
        # costs about as much as the rest of the step, bench/bench_sched.py)
        if self.history is None:
            cap = self.spatial.select(ctx.downstream_active)
        else:
            spatial = self.spatial.decide(ctx.downstream_active)
            cap = spatial.sm_shared
            self.history.append(HorizonStep(ctx.now, view, spatial, ctx.downstream_active, ctx.bw_util))
        last = self._last
        if view.hidden is not last.hidden or cap != last.sm_cap:
            self._last = last = StepDecision(view.hidden, None, cap)
        return last

    def on_step(self, outcome: StepOutcome) -> None:
        # step 4: publish progress (the requests that got prefill tokens were admitted)
        if outcome.scheduled:
            self.temporal.admitted(outcome.scheduled)

    def on_finish(self, rid: int, now: float) -> None:
        self.temporal.finished(rid)
