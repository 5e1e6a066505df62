"""What the ingress and the node replicas say to each other (plain picklable dataclasses).

One request visits each plan node on its route in one *session*: the ingress opens it with
:class:`OpenOrder` (a streaming call pinned to one replica), the replica streams
:class:`StageEvent` back (``opened`` first, then ``first``/``done`` of each component, ``end``
when all its components are done, or ``failed``), and the ingress sends cross-node releases
and upstream-finished notices into the open session. Every message names the request id, so
a session re-opened after a replica failure is the same request (idempotent by id).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omniplane.spec.work import ResolvedWork

OPENED, FIRST, DONE, END, FAILED = "opened", "first", "done", "end", "failed"


@dataclass(frozen=True, slots=True)
class Released:
    """Predecessor ``pred`` released component ``comp`` from ``ready_at`` (model time)."""

    comp: str
    pred: str
    ready_at: float


@dataclass(frozen=True)
class OpenOrder:
    """Run components ``comps`` of request ``rid`` on this node.

    ``nodes`` maps every component on the request's path to the plan node serving it (the
    route the ingress picked); ``released`` lists the releases already known (from other nodes,
    or from this node's components done before a failed attempt); ``upstream_done`` lists the
    streaming vocoders whose feeding LLM has already finished.
    """

    rid: int
    type: str
    arrival: float
    work: ResolvedWork
    nodes: dict[str, str]
    comps: tuple[str, ...]
    released: tuple[Released, ...] = ()
    upstream_done: tuple[str, ...] = ()
    attempt: int = 0


@dataclass(frozen=True, slots=True)
class StageEvent:
    kind: str  # opened / first / done / end / failed
    comp: str = ""
    t: float = 0.0  # model time of the milestone
    info: dict[str, str] = field(default_factory=dict)  # replica id (opened), reason (failed)
