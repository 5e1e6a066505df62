"""The bridge between a scheduling :class:`~omniplane.policy.Policy` and vLLM's requests.

vLLM names requests with strings; a policy knows int ``rid``\\ s. The bridge numbers requests
in ``add_request`` order, stamps each one's class, arrival and deadline with a monotonic clock
(arrival = when the request reached this stage's scheduler; deadline = arrival + the class's
SLO, infinite without one), and calls the policy in the order its docstring states:
``on_arrival`` once, ``decide`` at every step, ``on_step`` after the step's output,
``on_finish`` exactly once per request.

Nothing here imports vLLM: requests are read by attribute (``request_id``, ``priority``,
``num_prompt_tokens``, ``num_computed_tokens``, ``num_output_tokens``, ``max_tokens``,
``additional_information``), so the bridge is tested with plain objects as well as with the
real vLLM ``Request``.

The policy's view is built lazily: ``StepContext.waiting`` / ``running`` are sequences that
make a :class:`SeqInfo` only when the policy reads it, so a policy that never looks (FCFS)
costs nothing per request. They reflect the requests at ``decide`` time; a policy must not keep
them past the call.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from omniplane.policy import PathClass, Policy, SeqInfo, StepContext, StepDecision, StepOutcome
from omniplane.vllm.classes import ClassResolver
from omniplane.vllm.settings import SchedulerSettings

log = logging.getLogger(__name__)
NO_DECISION = StepDecision()


@dataclass(slots=True)
class Tracked:
    rid: int
    request: Any
    cls: str
    arrival: float
    deadline: float
    path: PathClass = PathClass.SHORT  # SHORT: ends at this stage; LONG: continues downstream
    first_out: bool = False
    info: SeqInfo | None = None
    info_key: tuple[int, int] = (-1, -1)


class LazyInfos(Sequence[SeqInfo]):
    """A read-only sequence of :class:`SeqInfo` built on access from live requests."""

    __slots__ = ("_info", "_reqs")

    def __init__(self, reqs: list[Any], info: Callable[[Any], SeqInfo]) -> None:
        self._reqs, self._info = reqs, info

    def __len__(self) -> int:
        return len(self._reqs)

    @overload
    def __getitem__(self, i: int) -> SeqInfo: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[SeqInfo]: ...

    def __getitem__(self, i: int | slice) -> SeqInfo | Sequence[SeqInfo]:
        if isinstance(i, slice):
            return [self._info(r) for r in self._reqs[i]]
        return self._info(self._reqs[i])

    def __iter__(self) -> Iterator[SeqInfo]:
        return map(self._info, self._reqs)


class PolicyBridge:
    """One policy driven from one stage scheduler (see the module docstring)."""

    def __init__(
        self, policy: Policy, settings: SchedulerSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.policy, self.settings, self.clock = policy, settings, clock
        self.resolver = ClassResolver(settings)
        self.by_id: dict[str, Tracked] = {}
        self.by_rid: dict[int, Tracked] = {}
        self._next_rid = 0
        self.step = 0
        self.finished = 0
        self.policy_errors = 0

    # ---- requests ---------------------------------------------------------------------------
    def admit(self, request: Any) -> Tracked | None:
        """Stamp and announce a new request (None if its id is already tracked: vLLM re-adds
        a streaming-input session under the same id)."""
        if request.request_id in self.by_id:
            return None
        now = self.clock()
        cls = self.resolver.resolve(
            int(getattr(request, "priority", 0) or 0), getattr(request, "additional_information", None)
        )
        c = self.settings.classes[cls]
        t = Tracked(
            self._next_rid, request, cls, now, now + c.slo_s if c.slo_s is not None else math.inf, c.path
        )
        self._next_rid += 1
        self.by_id[request.request_id] = t
        self.by_rid[t.rid] = t
        self._guard("on_arrival", self.policy.on_arrival, self.seq_info(request), now)
        return t

    def tracked(self, request: Any) -> Tracked:
        t = self.by_id.get(request.request_id)
        return t if t is not None else self.admit(request) or self.by_id[request.request_id]

    def seq_info(self, request: Any) -> SeqInfo:
        """The policy's view of ``request``; cached per request while its progress is unchanged
        (a waiting request's view is the same step after step)."""
        t = self.by_id.get(request.request_id)
        if t is None:
            t = self.tracked(request)
        computed, generated = request.num_computed_tokens, request.num_output_tokens
        info = t.info
        if info is not None and t.info_key == (computed, generated):
            return info
        prompt = int(request.num_prompt_tokens)
        info = SeqInfo(
            t.rid,
            t.cls,
            t.arrival,
            prompt,
            min(int(computed), prompt),
            int(getattr(request, "max_tokens", 0) or 0),
            int(generated),
        )
        t.info, t.info_key = info, (computed, generated)
        return info

    def finish(self, request_id: str, now: float | None = None) -> bool:
        """Tell the policy ``request_id`` is done here; False if it was not tracked (or already
        finished), so each request is reported exactly once."""
        t = self.by_id.pop(request_id, None)
        if t is None:
            return False
        del self.by_rid[t.rid]
        self.finished += 1
        self._guard("on_finish", self.policy.on_finish, t.rid, self.clock() if now is None else now)
        return True

    # ---- steps ------------------------------------------------------------------------------
    def context(
        self,
        waiting: list[Any],
        running: list[Any],
        *,
        downstream_active: int,
        bw_util: float,
        total_sms: int,
        now: float,
    ) -> StepContext:
        return StepContext(
            now,
            self.step,
            LazyInfos(waiting, self.seq_info),
            LazyInfos(running, self.seq_info),
            downstream_active,
            bw_util,
            total_sms,
        )

    def decide(self, ctx: StepContext) -> StepDecision:
        decision = self._guard("decide", self.policy.decide, ctx)
        return decision if isinstance(decision, StepDecision) else NO_DECISION

    def hidden_requests(self, decision: StepDecision, hideable: list[Any]) -> list[Any]:
        """The requests of ``hideable`` (this step's ``self.waiting``) the decision hides (an
        untracked request is never hidden; a failure here counts as a policy error and hides
        nothing)."""
        if not decision.hidden:
            return []
        found = self._guard("hidden_requests", self._hidden, decision.hidden, hideable)
        return found if isinstance(found, list) else []

    def _hidden(self, hidden: frozenset[int], hideable: list[Any]) -> list[Any]:
        by_id = self.by_id
        return [r for r in hideable if (t := by_id.get(r.request_id)) is not None and t.rid in hidden]

    def ordered(self, decision: StepDecision, visible: list[Any]) -> list[Any] | None:
        """``visible`` in the decision's order (None: keep FCFS); rids the decision does not
        name, and untracked requests, keep their relative order after the named ones."""
        if decision.order is None:
            return None
        found = self._guard("ordered", self._ordered, decision.order, visible)
        return found if isinstance(found, list) else None

    def _ordered(self, order: tuple[int, ...], visible: list[Any]) -> list[Any]:
        rank = {rid: i for i, rid in enumerate(order)}
        by_id, last = self.by_id, len(rank)

        def key(r: Any) -> int:
            t = by_id.get(r.request_id)
            return last if t is None else rank.get(t.rid, last)

        return sorted(visible, key=key)

    def reconcile(self, live: Any, now: float) -> int:
        """Finish every tracked request the scheduler no longer holds (``live``: its
        ``requests`` mapping), so a finish vLLM never reported (an abort path, an engine error)
        cannot hold the policy's state, e.g. the long-path cap's occupancy, for good. Returns
        how many were reconciled (each is logged once)."""
        gone = [i for i in self.by_id if i not in live]
        for i in gone:
            log.warning("omniplane: request %s left the scheduler without a finish report; finishing it", i)
            self.finish(i, now)
        return len(gone)

    def outcome(self, *, now: float, duration: float, prefill: list[str], sm_cap: int | None) -> None:
        """Report a step: ``prefill`` are the ids that got prompt tokens; a request's first
        token can only come out of such a step, so only they are checked for one (once)."""
        by_id = self.by_id
        rids, first = [], []
        for i in prefill:
            t = by_id.get(i)
            if t is None:
                continue
            rids.append(t.rid)
            if not t.first_out and t.request.num_output_tokens > 0:
                t.first_out = True
                first.append(t.rid)
        self._guard(
            "on_step", self.policy.on_step, StepOutcome(now, duration, tuple(rids), tuple(first), sm_cap)
        )
        self.step += 1

    def _guard(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Call the policy; on an exception either re-raise (``on_policy_error: raise``) or log
        it, count it and carry on as FCFS for this call (``fcfs``, the default: a broken policy
        must not take the engine down)."""
        try:
            return fn(*args)
        except Exception:
            self.policy_errors += 1
            if self.settings.on_policy_error == "raise":
                raise
            if self.policy_errors <= 10 or self.policy_errors % 1000 == 0:
                log.exception(
                    "omniplane: policy %s.%s failed (%d so far); using FCFS for this call",
                    getattr(self.policy, "name", type(self.policy).__name__),
                    what,
                    self.policy_errors,
                )
            return None
