"""Throughput of one open-loop replay, three ways, each labelled with what it measures.

An open loop below capacity completes what it is offered, so its throughput is the offered rate
give or take the requests in flight at the edges of the window it is taken over. A policy that
deliberately holds one class inside its slack (HorizonServe's long-path admission cap) moves
completions later, and a metric whose window ends at the last completion charges that hold as
lost throughput. So a replay reports:

* ``span_rps``: completed requests / (last completion - first send) (the metric of
  :func:`omniplane.fidelity.compare.summarize`; its window ends on the run's last, possibly
  deliberately held, request);
* ``window_rps``: completions between the first and the last send, per second of that window
  (the arrival window; requests still in flight when the last one is sent are not counted, so
  it reads low by the requests in flight at its end, rate x mean latency of them);
* ``steady_tokens_per_s``: output tokens delivered in the middle of the arrival window (its first
  and last ``trim`` fraction left out, so neither the empty start nor the tail counts). The
  client keeps each request's first-token and last-token times, not every token's: the tokens
  between them are placed evenly (an interpolation, labelled in the result);
* ``offered_rps``: requests sent per second of the arrival window, for scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omniplane.fidelity.compare import Timing

TRIM = 0.1  # assumption: the first and last tenth of the arrival window are its edges
NOTE = ("span_rps: completed / (last completion - first send); window_rps: completions between "
        "the first and the last send / that window; steady_tokens_per_s: output tokens in the "
        "arrival window less its first and last {trim:.0%}, tokens between a request's first and "
        "last token placed evenly (interpolated: the client keeps no per-token times)")


def tokens_in(t: Timing, lo: float, hi: float) -> int:
    """Output tokens of ``t`` delivered in ``[lo, hi)``: the first at ``t.first``, the others
    evenly spaced up to ``t.end`` (the last one at ``t.end``)."""
    n = t.output_tokens
    if n <= 0:
        return 0
    if n == 1:
        return int(lo <= t.first < hi)
    step = (t.end - t.first) / (n - 1)
    if step <= 0:
        return n if lo <= t.first < hi else 0
    # k in [0, n-1] with lo <= first + k * step < hi
    k_lo = max(0, math.ceil((lo - t.first) / step))
    k_hi = min(n - 1, math.ceil((hi - t.first) / step) - 1)
    return max(0, k_hi - k_lo + 1)


def throughput(timings: Sequence[Timing], sent: Sequence[float],
               trim: float = TRIM) -> dict[str, float | None]:
    """The metrics of the module docstring. ``timings``: the completed requests; ``sent``: every
    request's send time (completed or not), on the same clock."""
    if not 0.0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim}")
    out: dict[str, float | None] = {"span_rps": None, "window_rps": None, "steady_tokens_per_s": None,
                                    "offered_rps": None,
                                    "window_s": None, "steady_window_s": None}
    if not sent:
        return out
    t0, t1 = min(sent), max(sent)
    w = t1 - t0
    if timings:
        span = max(t.end for t in timings) - t0
        out["span_rps"] = len(timings) / span if span > 0 else None
    if w <= 0:
        return out
    out["window_s"] = w
    out["offered_rps"] = (len(sent) - 1) / w  # arrivals per second between the first and last
    out["window_rps"] = sum(t0 <= t.end <= t1 for t in timings) / w
    lo, hi = t0 + trim * w, t1 - trim * w
    out["steady_window_s"] = hi - lo
    out["steady_tokens_per_s"] = sum(tokens_in(t, lo, hi) for t in timings) / (hi - lo)
    return out
