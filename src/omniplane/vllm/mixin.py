"""The scheduler wrapper, as a mixin placed before a vLLM scheduler class.

``class OmniplaneScheduler(PolicySchedulerMixin, Scheduler)``: every ``schedule()`` asks the
policy for this step's view, removes the hidden requests from ``self.waiting``, calls
``super().schedule()`` and puts them back in a ``finally`` (so an exception inside vLLM loses
nothing); ``add_request`` stamps class, arrival and deadline; ``update_from_output`` reports
the step's outcome and the finished requests; ``finish_requests`` (aborts) reports those.
The SM cap is snapped to the ladder and published in the control record for the workers.

No vLLM import here (the base class brings it): the same code wraps vLLM's ``Scheduler``,
vLLM-Omni's ``OmniARScheduler`` or a test double with the same attributes (``waiting``,
``running``, ``requests``, ``finished_req_ids``, optional ``kv_holding_waiting`` and
``skipped_waiting``).

Two side queues of waiting requests are shown to the policy as waiting, ahead of ``waiting``
(vLLM drains them first), and counted as active, but never hidden or reordered:

* ``kv_holding_waiting`` (vLLM 0.32.0, where this was first written: waiting requests that
  already hold KV blocks): hiding them would keep their blocks idle.
* ``skipped_waiting`` (vLLM 0.30.0, the release ``.venv-vllm`` pins, ``v1/core/sched/
  scheduler.py``): requests in a blocked status (waiting for a structured-output grammar, for
  remote KV blocks, which are already allocated, or for streaming input, which holds a request
  slot) and requests a pass set aside (stale output in flight, the LoRA limit, an encoder input
  in transit). vLLM's FCFS pass takes this queue before ``waiting``, so a policy's ``order``
  cannot put a ``waiting`` request ahead of one of them, and a policy that hides one of them
  does not stop vLLM admitting it (a limitation, labelled here and in docs/reference/vllm.md).

A lookup that finds no such queue (the other release) finds nothing. With vLLM's ``priority``
scheduling policy the waiting queue is a heap, and a decision's ``order`` cannot be imposed on
it (hiding still works).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from omniplane.gpu.checks import CheckFailed, ThrottleState, check_signal
from omniplane.policy import StepDecision
from omniplane.vllm import queues
from omniplane.vllm.bridge import PolicyBridge
from omniplane.vllm.policies import PolicyInputs, scheduler_policy
from omniplane.vllm.settings import SchedulerSettings, load_settings
from omniplane.vllm.stage import StageControl

log = logging.getLogger(__name__)
MAX_PENDING = 64  # assumption: far more steps in flight than vLLM's async scheduling keeps (1-2)


@dataclass
class _Pending:
    started: float
    sms: int | None
    prefill: list[str]


@dataclass
class OmniplaneState:
    """Per-scheduler state of the wrapper (``scheduler.omniplane``)."""

    settings: SchedulerSettings
    bridge: PolicyBridge
    control: StageControl
    pending: dict[int, _Pending] = field(default_factory=dict)
    last_decision: StepDecision = field(default_factory=StepDecision)
    last_hidden: frozenset[str] = frozenset()
    last_sms: int | None = None
    # fail closed (omniplane.gpu.checks): whether this scheduler publishes SM caps, and why not
    throttle: ThrottleState = field(default_factory=ThrottleState)

    @classmethod
    def build(cls, settings: SchedulerSettings) -> OmniplaneState:
        control = StageControl(settings)
        ladder = control.ladder
        throttle = ThrottleState()
        factory_policy = not settings.policy.startswith("import:")
        if ladder is not None and not settings.ladder.configured and factory_policy:
            log.warning(
                "omniplane: no SM ladder configured (ladder.s_max or ladder.levels): the default S_cap "
                "would be %d of %d SMs, nearly the whole GPU, the regime HorizonServe calls unsafe "
                "(section 4.4); policy %s will not throttle. Set ladder.s_max from a fixed-SM sweep "
                "(omniplane calibrate).", ladder.s_cap, settings.total_sms, settings.policy,
            )
            ladder = None
            throttle.disable("omniplane scheduler", "SM ladder", "no ladder configured", quiet=True)
        if ladder is None and not throttle.check:
            throttle.disable("omniplane scheduler", "SM ladder", "no GPU kind (total_sms 0)", quiet=True)
        elif ladder is not None and settings.role == "shared":
            try:
                check_signal(control.sampler)
                throttle.passed.append(f"memory-activity signal ({control.sampler.source})")
            except CheckFailed as exc:
                throttle.disable("omniplane scheduler", exc.check, exc.reason)
                ladder = None
        policy = scheduler_policy(settings.policy, PolicyInputs.from_settings(settings, ladder))
        state = cls(settings, PolicyBridge(policy, settings), control, throttle=throttle)
        log.info(
            "omniplane scheduler: policy %s, role %s, classes %s, control %s, sampler %s, ladder %s, "
            "SM throttling %s",
            settings.policy,
            settings.role,
            {n: (c.priority, c.slo_s) for n, c in settings.classes.items()},
            settings.control,
            control.sampler.source,
            list(ladder.levels) if ladder is not None else [],
            "on" if throttle.enabled else f"off ({throttle.check}: {throttle.reason})",
        )
        return state


SIDE_QUEUES = ("kv_holding_waiting", "skipped_waiting")  # shown and counted, never hidden


def _side_waiting(sched: Any) -> list[Any]:
    """The requests of vLLM's side queues (module docstring), in the order vLLM drains them."""
    return [r for name in SIDE_QUEUES for r in getattr(sched, name, ())]


def _active(sched: Any) -> int:
    return len(sched.running) + len(sched.waiting) + sum(len(getattr(sched, n, ())) for n in SIDE_QUEUES)


class PolicySchedulerMixin:
    omniplane: OmniplaneState

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        config = getattr(self, "vllm_config", None)
        self.omniplane = OmniplaneState.build(
            load_settings(getattr(config, "additional_config", None), os.environ)
        )

    # ---- requests in and out ----------------------------------------------------------------
    def add_request(self, request: Any) -> None:
        base: Any = super()
        base.add_request(request)
        if self.requests.get(request.request_id) is request and not request.is_finished():  # type: ignore[attr-defined]
            self.omniplane.bridge.admit(request)

    def finish_requests(self, request_ids: Any, finished_status: Any) -> Any:
        base: Any = super()
        result = base.finish_requests(request_ids, finished_status)
        self._report_finished(time.monotonic())
        return result

    def _report_finished(self, now: float) -> None:
        finish = self.omniplane.bridge.finish
        for rid in tuple(self.finished_req_ids):  # type: ignore[attr-defined]
            finish(rid, now)

    # ---- one step ----------------------------------------------------------------------------
    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        op, bridge, control = self.omniplane, self.omniplane.bridge, self.omniplane.control
        sched: Any = self
        now = bridge.clock()
        bridge.reconcile(sched.requests, now)  # finishes vLLM never reported (O(requests))
        waiting = list(sched.waiting)
        ctx = bridge.context(
            _side_waiting(sched) + waiting,
            list(sched.running),
            downstream_active=control.downstream_active(),
            bw_util=control.bw_util(now),
            total_sms=op.settings.total_sms,
            now=now,
        )
        decision = bridge.decide(ctx)
        hidden = bridge.hidden_requests(decision, waiting)
        ordered = None
        if decision.order is not None and queues.is_fcfs(sched.waiting):
            gone = {id(r) for r in hidden}
            ordered = bridge.ordered(decision, [r for r in waiting if id(r) not in gone])
        touched = bool(hidden) or ordered is not None
        if touched:
            queues.hide(sched.waiting, hidden, ordered)
        try:
            base: Any = super()
            out = base.schedule(*args, **kwargs)
        finally:
            if touched:
                queues.restore(sched.waiting, waiting, hidden)
        # fail closed: no cap leaves this process while a check has turned throttling off
        level, sms = control.snap(decision.sm_cap) if op.throttle.enabled else (None, None)
        op.last_decision, op.last_sms = decision, sms
        op.last_hidden = frozenset(r.request_id for r in hidden) if hidden else frozenset()
        if len(op.pending) >= MAX_PENDING:  # outputs never reported back (engine errors): drop the oldest
            del op.pending[next(iter(op.pending))]
        op.pending[id(out)] = _Pending(now, sms, self._prefill_ids(out))
        control.publish(step=bridge.step, active=_active(sched), level=level, sms=sms, bw=ctx.bw_util)
        return out

    def _prefill_ids(self, out: Any) -> list[str]:
        """Requests that got prompt tokens in ``out`` (``schedule()`` has already advanced
        ``num_computed_tokens`` by the scheduled count)."""
        reqs = self.requests  # type: ignore[attr-defined]
        return [
            rid
            for rid, n in out.num_scheduled_tokens.items()
            if (r := reqs.get(rid)) is not None and r.num_computed_tokens - n < r.num_prompt_tokens
        ]

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        op = self.omniplane
        base: Any = super()
        result = base.update_from_output(scheduler_output, model_runner_output)
        now = op.bridge.clock()
        pend = op.pending.pop(id(scheduler_output), None)
        if pend is not None:
            op.bridge.outcome(now=now, duration=now - pend.started, prefill=pend.prefill, sm_cap=pend.sms)
        else:
            op.bridge.outcome(now=now, duration=0.0, prefill=[], sm_cap=None)
        self._report_finished(now)
        if op.settings.role == "downstream":
            op.control.publish(step=op.bridge.step, active=_active(self), level=None, sms=None, bw=0.0)
        return result

    def shutdown(self) -> None:
        base: Any = super()
        try:
            base.shutdown()
        finally:
            self.omniplane.control.close()
