"""One request's work at one component on one executor, and the queues that hold it."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from omniplane.sim.request import SimRequest


class Job:
    """Mutable progress of a request at a component. Fields used depend on the engine kind."""

    __slots__ = ("admit", "comp", "computed", "dec_i0", "engine", "generated", "host", "out",
                 "phase", "prompt", "prompt_cut", "ready", "remaining", "req", "size", "state",
                 "target", "upstream_done")

    def __init__(self, req: SimRequest, comp: str, ready: float, host: Any) -> None:
        self.req = req
        self.comp = comp
        self.ready = ready  # when it may join the queue
        self.host = host  # the engine that prepared it (a shared queue's group leader)
        self.engine: Any = None  # the engine that took it into a step (None while waiting)
        self.admit = 0  # admission sequence number (LLM preemption picks the latest)
        self.state = 0  # engine-specific
        # LLM
        self.prompt = 0
        self.prompt_cut = 0  # prompt tokens not there yet when a streaming LLM feed starts it
        self.target = 0  # tokens to prefill: the prompt, plus generated tokens after a preemption
        self.computed = 0
        self.out = 0
        self.generated = 0
        self.dec_i0 = 0
        # batch engines
        self.remaining = 0.0  # DiT steps left / audio seconds left
        self.size = 0.0  # tokens / pixels / seconds per step
        self.phase = 0
        self.upstream_done = True

    @property
    def rid(self) -> int:
        return self.req.rid


class JobQueue:
    """FCFS waiting jobs of one component: a private queue (jobs pinned to this executor) and,
    for single-component nodes, a queue shared by every executor of the group."""

    __slots__ = ("private", "shared")

    def __init__(self, shared: deque[Job] | None) -> None:
        self.private: deque[Job] = deque()
        self.shared = shared

    def __len__(self) -> int:
        return len(self.private) + (len(self.shared) if self.shared is not None else 0)

    def __bool__(self) -> bool:
        return bool(self.private) or bool(self.shared)

    def in_order(self) -> Iterator[Job]:
        """Jobs in ready-time order across both queues (each is already in that order)."""
        if not self.shared:
            yield from self.private
            return
        if not self.private:
            yield from self.shared
            return
        a, b = list(self.private), list(self.shared)
        i = j = 0
        while i < len(a) and j < len(b):
            if b[j].ready < a[i].ready:
                yield b[j]
                j += 1
            else:
                yield a[i]
                i += 1
        yield from a[i:]
        yield from b[j:]

    def remove(self, taken: set[int]) -> None:
        """Drop the jobs whose ``id()`` is in ``taken`` (admitted this step)."""
        if not taken:
            return
        left = set(taken)
        for q in (self.private, self.shared):
            if q is None:
                continue
            while q and id(q[0]) in left:  # the usual case: FCFS takes a prefix
                left.discard(id(q.popleft()))
            if left and q:
                kept = [j for j in q if id(j) not in left]
                left -= {id(j) for j in q} - {id(j) for j in kept}
                q.clear()
                q.extend(kept)

    def popleft_n(self, n: int) -> list[Job]:
        """Up to ``n`` jobs in FCFS order, removed from the queues."""
        p, q = self.private, self.shared
        if not q or not p:  # one queue holds everything: the common case
            src = q if q else p
            if n == 1:
                return [src.popleft()] if src else []
            return [src.popleft() for _ in range(min(n, len(src)))]
        out: list[Job] = []
        while len(out) < n and (p or q):
            if q and (not p or q[0].ready < p[0].ready):
                out.append(q.popleft())
            else:
                out.append(p.popleft())
        return out
