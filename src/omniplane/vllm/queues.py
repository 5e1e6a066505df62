"""Hiding requests from vLLM's waiting queue for one step, and putting them back.

vLLM's queues are an FCFS deque (``FCFSRequestQueue``) or a heap ordered by
``(priority, arrival_time)`` (``PriorityRequestQueue``); both are handled through their public
methods plus, for the deque, its deque operations. Requests are compared by identity.

Restoring an FCFS queue after ``super().schedule()``: the queue becomes the requests vLLM put
there during the step that were not there before (preempted ones, which vLLM prepends),
followed by every request of the step's starting queue that is still waiting (hidden ones and
visible ones vLLM did not admit), in their starting order. With nothing hidden this is exactly
the queue stock vLLM leaves (it prepends preempted and skipped requests; skipped requests were
ahead of every request it did not reach).
"""

from __future__ import annotations

from collections import deque
from typing import Any


def is_fcfs(queue: Any) -> bool:
    return isinstance(queue, deque)


def hide(queue: Any, hidden: list[Any], ordered: list[Any] | None = None) -> None:
    """Remove ``hidden`` from ``queue``; on an FCFS queue, ``ordered`` (the visible requests in
    the policy's order) replaces the visible part."""
    if is_fcfs(queue):
        if ordered is None:
            gone = {id(r) for r in hidden}
            ordered = [r for r in queue if id(r) not in gone]
        queue.clear()
        queue.extend(ordered)
    elif hidden:
        queue.remove_requests(hidden)


def restore(queue: Any, before: list[Any], hidden: list[Any]) -> None:
    """Put ``hidden`` back (see the module docstring for the order)."""
    if is_fcfs(queue):
        after = list(queue)
        was = {id(r) for r in before}
        keep = {id(r) for r in after} | {id(r) for r in hidden}
        queue.clear()
        queue.extend([r for r in after if id(r) not in was] + [r for r in before if id(r) in keep])
    else:
        for r in hidden:
            queue.add_request(r)
