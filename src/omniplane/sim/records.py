"""Per-request outcomes of a simulation, as columns (one entry per arrived request, in arrival
order): what callers compute their own statistics from, so that nobody needs the simulation
object itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from omniplane.sim.request import SimRequest

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
        rid = np.empty(n, dtype=np.int64)
        arrival, first, finish = np.empty(n), np.empty(n), np.empty(n)
        failed = np.zeros(n, dtype=bool)
        first_out = {c: np.full(n, NAN) for c in components}
        done = {c: np.full(n, NAN) for c in components}
        out_tokens = {c: np.zeros(n) for c in llms}
        reasons: dict[int, str] = {}
        types: list[str] = []
        for i, r in enumerate(requests):
            rid[i] = r.rid
            types.append(r.type)
            arrival[i] = r.arrival
            fr = r.first_response
            first[i] = NAN if fr is None else fr
            finish[i] = NAN if r.finish is None else r.finish
            if r.failed is not None:
                failed[i] = True
                reasons[r.rid] = r.failed
            for c, t in r.first_out.items():
                first_out[c][i] = t
            for c, t in r.done.items():
                done[c][i] = t
            for c in llms:
                w = r.work.get(c)
                if w is not None:
                    out_tokens[c][i] = w.get("output_tokens", 0.0)
        tpot = {}
        for c in llms:
            out = out_tokens[c]
            ok = (out > 1) & ~np.isnan(first_out[c]) & ~np.isnan(done[c])
            tp = np.full(n, NAN)
            tp[ok] = (done[c][ok] - first_out[c][ok]) / (out[ok] - 1)
            tpot[c] = tp
        return RequestRecords(rid, np.array(types, dtype=str), arrival, first, finish, failed,
                              first_out, done, tpot, reasons)

    def __len__(self) -> int:
        return len(self.rid)

    def latency(self) -> np.ndarray:
        """First-response latency per request (NaN where none happened)."""
        lat: np.ndarray = self.first_response - self.arrival
        return lat

    def latency_by_rid(self) -> dict[int, float | None]:
        lat = self.latency()
        return {int(r): (None if np.isnan(x) else float(x)) for r, x in zip(self.rid, lat, strict=True)}
