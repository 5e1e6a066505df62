"""Session affinity for Ray Serve: every call about one request on one node reaches the replica
that holds its session, and new sessions join the replica with the fewest open sessions.

Ray Serve's default router (power of two choices) picks a replica per call; a plan node's
session is a streaming call followed by release calls that must reach the same replica (the
simulator pins a request to one executor of a merged node). This router reads the
``affinity`` keyword of each call (``"<node>:<request id>"``):

* an ``open`` call picks the replica with the fewest sessions this router has opened and not
  seen end (join-shortest-queue, like ``omniplane.sim.topology.Group.least_loaded``; ties go to
  the replica that sorts first, so the order is stable), pins the key to it and counts the
  session until its response completes;
* any other call with a pinned key goes to the pinned replica while it lives; without a live
  pin it falls back to the least-loaded replica (the replica answers that it does not know the
  session, and the ingress re-opens it).

Pins live in a bounded LRU table (``max_pins``); a session outlives its pin only if that many
newer sessions were opened meanwhile. Requires Serve's strict ``max_ongoing_requests`` mode
(the default outside Ray Client), which is when Serve reports each routed call.

Uses Ray Serve's public (alpha) request-router API, ``ray.serve.request_router``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

OPEN_METHOD = "open"
MAX_PINS = 65536  # assumption: far more than the sessions one ingress replica holds at once


class AffinityRouter(RequestRouter):
    def initialize_state(self, max_pins: int = MAX_PINS, **kwargs: Any) -> None:
        self._pins: OrderedDict[str, ReplicaID] = OrderedDict()
        self._sessions: dict[ReplicaID, int] = {}
        self._max_pins = max_pins

    def _key(self, pr: PendingRequest | None) -> str | None:
        if pr is None:
            return None
        key = pr.kwargs.get("affinity")
        return key if isinstance(key, str) else None

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica], pending_request: PendingRequest | None = None
    ) -> list[list[RunningReplica]]:
        if not candidate_replicas:
            return []
        key = self._key(pending_request)
        if key is not None:
            pinned = self._pins.get(key)
            for r in candidate_replicas:
                if r.replica_id == pinned:
                    return [[r]]
        best = min(
            candidate_replicas, key=lambda r: (self._sessions.get(r.replica_id, 0), r.replica_id.unique_id)
        )
        return [[best]]

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result: Any) -> None:
        key = self._key(pending_request)
        if key is None or pending_request.metadata.call_method != OPEN_METHOD:
            return
        self._pins[key] = replica_id
        self._pins.move_to_end(key)
        while len(self._pins) > self._max_pins:
            self._pins.popitem(last=False)
        self._sessions[replica_id] = self._sessions.get(replica_id, 0) + 1
        loop = self._event_loop
        result.add_done_callback(lambda _: loop.call_soon_threadsafe(self._session_ended, replica_id))

    def _session_ended(self, replica_id: ReplicaID) -> None:
        n = self._sessions.get(replica_id, 0) - 1
        if n > 0:
            self._sessions[replica_id] = n
        else:
            self._sessions.pop(replica_id, None)

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self._sessions.pop(replica_id, None)
        for key in [k for k, r in self._pins.items() if r == replica_id]:
            del self._pins[key]
