"""One request's work at one component on one executor, and the queues that hold it."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from omniplane.sim.request import SimRequest


class Job:
    """Mutable progress of a request at a component. The first five fields are every job's; the
    engine that prepares the job (``Engine.prepare``) sets the fields its kind uses:

    LLM       ``prompt_cut`` (prompt tokens not there yet when a streaming LLM feed starts it),
              ``prompt``, ``out``, ``target`` (tokens to prefill: the prompt, plus generated
              tokens after a preemption), ``computed``, ``generated``, ``dec_i0`` (the decode
              iteration it joined at), ``admit`` (admission number: preemption picks the
              latest), ``state``
    DiT       ``remaining`` (denoising steps left)
    vocoder   ``phase`` (0 whole, 1 first chunk, 2 the rest), ``size`` (seconds of this
              part), ``remaining`` (seconds after the first chunk), ``upstream_done``
    """

    __slots__ = ("admit", "comp", "computed", "dec_i0", "engine", "generated", "host", "out",
                 "phase", "prompt", "prompt_cut", "ready", "remaining", "req", "size", "state",
                 "target", "upstream_done")
    # set by the engine that prepares the job (see above); declared here for the type checker
    admit: int
    computed: int
    dec_i0: int
    generated: int
    out: int
    phase: int
    prompt: int
    prompt_cut: int
    remaining: float
    size: float
    state: int
    target: int
    upstream_done: bool

    def __init__(self, req: SimRequest, comp: str, ready: float, host: Any) -> None:
        self.req = req
        self.comp = comp
        self.ready = ready  # when it may join the queue
        self.host = host  # the engine that prepared it (a shared queue's group leader)
        self.engine: Any = None  # the engine that took it into a step (None while waiting)

    @property
    def rid(self) -> int:
        return self.req.rid


def _first(a: Job, b: Job) -> bool:
    """Does ``a`` come before ``b`` in FCFS order: by ready time, ties by the request's arrival
    and id (so the order never depends on which same-time event ran first)."""
    if a.ready != b.ready:
        return a.ready < b.ready
    ra, rb = a.req, b.req
    return (ra.arrival, ra.rid) < (rb.arrival, rb.rid)


def push(q: deque[Job], job: Job) -> None:
    """Append ``job`` to an FCFS queue, keeping the tie order of :func:`_first`."""
    if not q or q[-1].ready != job.ready or _first(q[-1], job):
        q.append(job)
        return
    i = len(q) - 1
    while i > 0 and q[i - 1].ready == job.ready and not _first(q[i - 1], job):
        i -= 1
    q.insert(i, job)


class JobQueue:
    """FCFS waiting jobs of one component: a private queue (jobs pinned to this executor) and,
    for single-component nodes, a queue shared by every executor of the group. Each is in FCFS
    order (:func:`_first`); jobs join through :func:`push`."""

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
            if _first(b[j], a[i]):
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
            if not src:
                return []
            if n == 1 or len(src) == 1:
                return [src.popleft()]
            if n >= len(src):
                everything = list(src)
                src.clear()
                return everything
            return [src.popleft() for _ in range(n)]
        out: list[Job] = []
        while len(out) < n and (p or q):
            if q and (not p or _first(q[0], p[0])):
                out.append(q.popleft())
            else:
                out.append(p.popleft())
        return out
