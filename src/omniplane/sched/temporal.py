"""The temporal scheduler (HorizonServe section 4.3): the queue view the base scheduler sees.

Per shared-stage scheduling step it decides which waiting requests are *hidden* for that step
only (they are restored after it: the base scheduler's queue is never reordered or shortened):

* **N:M path rotation.** Steps are short-path phases and long-path phases, ``N`` short then
  ``M`` long per cycle. In a short-path phase the ordinary long-path prefills are hidden; in a
  long-path phase the ordinary short-path prefills are, *if the phase's own path has visible
  waiting work* (work conservation, ``conserve``, the default: the paper says non-phase
  requests "can be hidden"; hiding them while the phase has nothing to admit only idles the
  stage). ``conserve=False`` keeps the unconditional variant. ``M = 2`` (fixed, section 4.3);
  ``N = N_min + round(f (N_max - N_min))`` with ``f`` the fraction of waiting short-path
  requests that are protected, ``[N_min, N_max] = [2, 8]``. The paper writes the phase as
  ``k mod (N + M) < N``; with ``N`` changing between steps that can cut long phases short, so
  the cycle is counted explicitly: short-path steps while fewer than ``N`` (the current ``N``)
  have run in this cycle, then exactly ``M`` long-path steps. Every cycle has at most ``N_max``
  short and exactly ``M`` long steps, so long-path phases get at least ``M / (N_max + M)`` of
  the steps (20%), and exactly ``k mod (N + M) < N`` while ``N`` is constant.
* **Slack guard.** Protected requests (``u < u_guard``) are never hidden ("near-deadline
  requests can bypass ordinary path filtering", section 4.1). Decode continuations (admitted
  requests, also after a preemption) are never hidden either. The view keeps the base
  scheduler's order (FCFS): HorizonServe "hides requests ..., invokes the original vLLM-Omni
  scheduler, and restores the hidden requests" (section 5), it does not reorder them.
* **Long-path admission cap.** At most ``long_cap`` ordinary long-path requests occupy
  shared-stage slots at once; when the visible ordinary long-path prefills exceed the room
  left, the earliest deadlines stay visible and the rest are hidden. Protected requests are
  exempt (neither hidden by the cap nor counted against it).

The scheduler tracks the waiting requests itself from arrivals, admissions (the requests that
got prefill tokens in a step) and completions. A step whose waiting requests did not change
since the last step of the same phase reuses that step's view (O(1)); otherwise building the
hidden set is linear in the waiting requests.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass

from omniplane.policy import PathClass
from omniplane.sched.profiler import RequestSignals


@dataclass(frozen=True)
class RotationConfig:
    """``m``, ``n_min``, ``n_max``: section 4.3 ("we fix M = 2", "[N_min, N_max] = [2, 8]").
    ``long_cap``: ordinary long-path requests in the shared stage at once; ``rotate`` and
    ``cap_long`` switch the two mechanisms (the no-rotation ablation turns ``rotate`` off)."""

    m: int = 2
    n_min: int = 2
    n_max: int = 8
    long_cap: int = 2  # assumption: the paper gives no value; one per long-path phase step (= M)
    rotate: bool = True
    cap_long: bool = True
    conserve: bool = True  # hide non-phase prefills only while the phase has visible work

    def __post_init__(self) -> None:
        if self.m < 1:
            raise ValueError(f"RotationConfig.m must be >= 1, got {self.m}")
        if not 1 <= self.n_min <= self.n_max:
            raise ValueError(f"RotationConfig needs 1 <= n_min <= n_max, got n_min={self.n_min}, "
                             f"n_max={self.n_max}")
        if self.long_cap < 1:
            raise ValueError(f"RotationConfig.long_cap must be >= 1, got {self.long_cap}")

    @property
    def min_long_share(self) -> float:
        """The long-path phases' guaranteed share of steps, ``M / (N_max + M)``."""
        return self.m / (self.n_max + self.m)


@dataclass(slots=True)
class TemporalView:
    """One step's view: the phase, the rotation ratio and what is hidden (read-only by
    convention; reused while the waiting requests do not change)."""

    phase: PathClass
    n: int
    hidden: frozenset[int]
    protected_fraction: float
    capped: int  # ordinary long-path prefills hidden by the admission cap


_EMPTY: frozenset[int] = frozenset()


class TemporalScheduler:
    def __init__(self, config: RotationConfig | None = None) -> None:
        self.config = config or RotationConfig()
        self._sig: dict[int, RequestSignals] = {}  # every request in the stage
        # waiting, per path
        self._ordinary: dict[PathClass, dict[int, None]] = {PathClass.SHORT: {}, PathClass.LONG: {}}
        self._long_edf: list[tuple[float, int]] = []  # ordinary waiting long-path, by deadline
        self._protected: list[tuple[float, int]] = []  # protected waiting, by deadline
        self._protected_short = 0
        self._timers: list[tuple[float, int]] = []  # (protect_at, rid) of ordinary waiting
        self._running_long: set[int] = set()  # admitted while ordinary, not finished
        self._version = 0  # bumps whenever the waiting requests or the cap's occupancy change
        self._views: dict[PathClass, tuple[int, int, TemporalView]] = {}  # phase -> (version, n, view)
        self._short_done = 0  # short-path steps in the current rotation cycle
        self._long_done = 0  # long-path steps in the current rotation cycle

    # ---- bookkeeping -------------------------------------------------------------------
    def add(self, sig: RequestSignals) -> None:
        """A request reached the shared stage's queue."""
        if sig.rid in self._sig:
            raise ValueError(f"request {sig.rid} arrived twice")
        self._sig[sig.rid] = sig
        self._version += 1
        if sig.protected:
            self._protect(sig)
        else:
            self._ordinary[sig.path][sig.rid] = None
            if sig.path is PathClass.LONG:
                insort(self._long_edf, (sig.deadline, sig.rid))
            heapq.heappush(self._timers, (sig.protect_at, sig.rid))

    def _protect(self, sig: RequestSignals) -> None:
        insort(self._protected, (sig.deadline, sig.rid))
        if sig.path is PathClass.SHORT:
            self._protected_short += 1

    def _leave_waiting(self, sig: RequestSignals) -> bool:
        """Remove a waiting request from the waiting structures; True if it was ordinary."""
        self._version += 1
        ordinary = self._ordinary[sig.path]
        if sig.rid in ordinary:
            del ordinary[sig.rid]
            if sig.path is PathClass.LONG:
                _remove(self._long_edf, (sig.deadline, sig.rid))
            return True  # its timer is dropped lazily
        if _remove(self._protected, (sig.deadline, sig.rid)) and sig.path is PathClass.SHORT:
            self._protected_short -= 1
        return False

    def admitted(self, rids: Iterable[int]) -> None:
        """These requests got shared-stage tokens in the last step (admitted or continuing)."""
        for rid in rids:
            sig = self._sig.get(rid)
            if sig is None or rid in self._running_long:
                continue
            if self._leave_waiting(sig) and sig.path is PathClass.LONG:
                self._running_long.add(rid)
                self._version += 1

    def finished(self, rid: int) -> None:
        sig = self._sig.pop(rid, None)
        if sig is None:
            return
        self._leave_waiting(sig)
        if rid in self._running_long:
            self._running_long.discard(rid)
            self._version += 1

    def sync(self, running: set[int], waiting: Iterable[int]) -> None:
        """Reconcile with the engine's live requests (every step, before :meth:`view`).

        * A request the engine runs that is still tracked as waiting was admitted in a step
          whose outcome has not been reported yet (vLLM's async scheduling reports a step late):
          it is counted now, so the long-path cap cannot be exceeded.
        * An ordinary long-path request counted against the cap that the engine holds neither
          running nor waiting (preempted requests return to waiting) is gone: its finish was
          missed, and it is forgotten so the cap's room is not lost for good.

        ``waiting`` is read only when a counted request is not running (rare)."""
        sig_of = self._sig
        for rid in running:
            sig = sig_of.get(rid)
            if sig is not None and rid not in self._running_long and (
                    rid in self._ordinary[sig.path] or _contains(self._protected, (sig.deadline, rid))):
                self.admitted((rid,))
        if len(self._running_long) and not self._running_long <= running:
            live = running | set(waiting)
            for rid in [r for r in self._running_long if r not in live]:
                self.finished(rid)

    def refresh(self, now: float) -> None:
        """Step 1 of Algorithm 1 for waiting requests: those whose slack ratio fell below
        ``u_guard`` since the last step become protected."""
        timers = self._timers
        while timers and timers[0][0] < now:
            _, rid = heapq.heappop(timers)
            sig = self._sig.get(rid)
            if sig is not None and rid in self._ordinary[sig.path]:
                self._leave_waiting(sig)
                self._protect(sig)

    # ---- the view ----------------------------------------------------------------------
    def long_running(self) -> int:
        """Ordinary long-path requests occupying shared-stage slots (counted against the cap)."""
        return len(self._running_long)

    def waiting(self) -> int:
        return sum(len(o) for o in self._ordinary.values()) + len(self._protected)

    def is_protected(self, rid: int) -> bool:
        sig = self._sig.get(rid)
        return sig is not None and _contains(self._protected, (sig.deadline, rid))

    def view(self) -> TemporalView:
        """Step 2 of Algorithm 1: pick the phase, hide ordinary non-phase prefills, cap ordinary
        long-path prefills; the cycle advances by one step."""
        cfg = self.config
        short_waiting = len(self._ordinary[PathClass.SHORT]) + self._protected_short
        frac = self._protected_short / short_waiting if short_waiting else 0.0
        n = cfg.n_min + round(frac * (cfg.n_max - cfg.n_min))
        if self._long_done == 0 and self._short_done < n:
            phase = PathClass.SHORT
            self._short_done += 1
        else:
            phase = PathClass.LONG
            self._long_done += 1
            if self._long_done >= cfg.m:
                self._short_done = self._long_done = 0
        cached = self._views.get(phase)
        if cached is not None and cached[0] == self._version and cached[1] == n:
            return cached[2]
        short_o, long_o = self._ordinary[PathClass.SHORT], self._ordinary[PathClass.LONG]
        room = max(0, cfg.long_cap - len(self._running_long))
        over = self._long_edf[room:] if cfg.cap_long and len(self._long_edf) > room else []
        if cfg.rotate and phase is PathClass.SHORT:
            # visible short-path work: ordinary or protected short-path requests
            hide_long = bool(long_o) and (not cfg.conserve or bool(short_o) or self._protected_short > 0)
            if hide_long:
                hidden, capped = frozenset(long_o), 0
            else:  # nothing of the phase to admit: the long-path prefills fall to the cap
                hidden = frozenset(rid for _, rid in over) if over else _EMPTY
                capped = len(over)
        else:
            hide_short = cfg.rotate and bool(short_o) and (
                not cfg.conserve or self._long_visible(len(over)))
            capped = len(over)
            if hide_short or over:
                out = [rid for _, rid in over]
                if hide_short:
                    out.extend(short_o)
                hidden = frozenset(out)
            else:
                hidden = _EMPTY
        view = TemporalView(phase, n, hidden, frac, capped)
        self._views[phase] = (self._version, n, view)
        return view

    def _long_visible(self, capped: int) -> bool:
        """Whether a long-path phase has waiting long-path work the view shows: a protected
        long-path request, or an ordinary one the admission cap lets through."""
        if len(self._protected) > self._protected_short:
            return True
        return len(self._long_edf) > capped


def _remove(items: list[tuple[float, int]], key: tuple[float, int]) -> bool:
    i = bisect_left(items, key)
    if i < len(items) and items[i] == key:
        del items[i]
        return True
    return False


def _contains(items: list[tuple[float, int]], key: tuple[float, int]) -> bool:
    i = bisect_left(items, key)
    return i < len(items) and items[i] == key
