"""Per-request outcomes of a simulation, as columns (one entry per arrived request, in arrival
order): what callers compute their own statistics from, so that nobody needs the simulation
object itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from omniplane.sim.request import SimRequest
from omniplane.spec import FirstResponse

NAN = float("nan")


@dataclass(frozen=True)
class RequestRecords:
    """Times are simulated seconds; NaN where a milestone did not happen (still in flight when
    the run stopped, refused, or not on the request's path)."""

    rid: np.ndarray  # int64
    type: np.ndarray  # str
    arrival: np.ndarray
    first_response: np.ndarray  # by the type's metric: TTFT, TTFO or end-to-end
    finish: np.ndarray  # completion, or refusal
    failed: np.ndarray  # bool: refused (e.g. longer than the KV cache); reasons in ``reasons``
    first_out: dict[str, np.ndarray]  # per component: its first output
    done: dict[str, np.ndarray]  # per component: its completion
    tpot: dict[str, np.ndarray]  # per LLM component: seconds per output token after the first
    reasons: dict[int, str]  # rid -> why it was refused

    @staticmethod
    def of(requests: Sequence[SimRequest], components: Sequence[str], llms: Sequence[str]) -> RequestRecords:
        n = len(requests)
        rid = np.fromiter((r.rid for r in requests), dtype=np.int64, count=n)
        types = np.array([r.type for r in requests], dtype=str)
        arrival = np.fromiter((r.arrival for r in requests), dtype=float, count=n)
        finish = np.fromiter((NAN if r.finish is None else r.finish for r in requests), dtype=float, count=n)
        failed = np.fromiter((r.failed is not None for r in requests), dtype=bool, count=n)
        reasons = {r.rid: r.failed for r in requests if r.failed is not None}
        first_out = {c: np.full(n, NAN) for c in components}
        done = {c: np.full(n, NAN) for c in components}
        first = np.full(n, NAN)
        tpot = {c: np.full(n, NAN) for c in llms}
        by_type: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            by_type.setdefault(r.type, []).append(i)
        for rows in by_type.values():
            path = requests[rows[0]].path
            idx = np.array(rows)
            of_type = [requests[i] for i in rows]
            for c in path.components:
                first_out[c][idx] = [r.first_out.get(c, NAN) for r in of_type]
                done[c][idx] = [r.done.get(c, NAN) for r in of_type]
            if path.metric is FirstResponse.E2E:  # the last completion, once all happened
                first[idx] = np.max([done[c][idx] for c in path.components], axis=0)
            else:
                first[idx] = first_out[path.sink][idx]
            for c in path.components:
                if c in tpot:
                    out = np.array([r.work[c].get("output_tokens", 0.0) for r in of_type])
                    f, d = first_out[c][idx], done[c][idx]
                    ok = (out > 1) & ~np.isnan(f) & ~np.isnan(d)
                    col = np.full(len(rows), NAN)
                    col[ok] = (d[ok] - f[ok]) / (out[ok] - 1)
                    tpot[c][idx] = col
        return RequestRecords(rid, types, arrival, first, finish, failed, first_out, done, tpot, reasons)

    def __len__(self) -> int:
        return len(self.rid)

    def latency(self) -> np.ndarray:
        """First-response latency per request (NaN where none happened)."""
        lat: np.ndarray = self.first_response - self.arrival
        return lat

    def latency_by_rid(self) -> dict[int, float | None]:
        lat = self.latency()
        return {int(r): (None if np.isnan(x) else float(x)) for r, x in zip(self.rid, lat, strict=True)}
