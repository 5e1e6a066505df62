"""Hiding and restoring on vLLM-shaped queues (a deque, and a heap-backed queue), with a
simulated vLLM step in between: admit some visible requests from the front, skip some (they go
back to the front), preempt running ones (prepended)."""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.vllm import queues


class Req:
    def __init__(self, i: int) -> None:
        self.i = i

    def __lt__(self, other: Req) -> bool:
        return self.i < other.i

    def __repr__(self) -> str:
        return f"R{self.i}"


class HeapQueue:
    """vLLM's PriorityRequestQueue, reduced to what queues.py uses."""

    def __init__(self, reqs: list[Req]) -> None:
        self._heap = list(reqs)
        heapq.heapify(self._heap)

    def add_request(self, r: Req) -> None:
        heapq.heappush(self._heap, r)

    def remove_requests(self, rs: list[Req]) -> None:
        gone = set(map(id, rs))
        self._heap = [r for r in self._heap if id(r) not in gone]
        heapq.heapify(self._heap)

    def __iter__(self) -> Any:
        return iter(sorted(self._heap))


@settings(deadline=None)  # no timing in tests: on the shared machine one example took 2.3 s
@given(st.integers(0, 30), st.data())
def test_fcfs_restore_keeps_order_and_loses_nothing(n: int, data: st.DataObject) -> None:
    before = [Req(i) for i in range(n)]
    hidden = [r for r in before if data.draw(st.booleans())]
    q: deque[Req] = deque(before)
    queues.hide(q, hidden)
    assert not set(map(id, q)) & set(map(id, hidden))
    # a vLLM step: pop from the front, admitting or skipping; skipped go back to the front
    admitted, skipped = [], []
    for _ in range(data.draw(st.integers(0, len(q)))):
        r = q.popleft()
        (skipped if data.draw(st.booleans()) else admitted).append(r)
    q.extendleft(reversed(skipped))
    preempted = [Req(100 + i) for i in range(data.draw(st.integers(0, 3)))]
    q.extendleft(reversed(preempted))
    queues.restore(q, before, hidden)
    gone = set(map(id, admitted))
    assert list(q) == preempted + [r for r in before if id(r) not in gone]


def test_fcfs_order_is_applied_for_the_step_only() -> None:
    before = [Req(i) for i in range(5)]
    q: deque[Req] = deque(before)
    queues.hide(q, [before[1]], ordered=[before[4], before[3], before[2], before[0]])
    assert [r.i for r in q] == [4, 3, 2, 0]
    q.popleft()  # vLLM admits R4
    queues.restore(q, before, [before[1]])
    assert [r.i for r in q] == [0, 1, 2, 3]


def test_priority_queue_hidden_requests_come_back() -> None:
    before = [Req(i) for i in range(6)]
    q = HeapQueue(before)
    queues.hide(q, [before[0], before[3]])
    assert [r.i for r in q] == [1, 2, 4, 5]
    q.remove_requests([before[1]])  # admitted
    queues.restore(q, before, [before[0], before[3]])
    assert [r.i for r in q] == [0, 2, 3, 4, 5]
    assert not queues.is_fcfs(q) and queues.is_fcfs(deque())
