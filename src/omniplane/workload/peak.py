"""The rate to plan capacity for from a trace: a percentile of the per-minute arrival rate within
its busiest hour (``omniplane plan --rate-from TRACE``).

A heuristic, not a fitted model: the busiest hour is the one-hour window with the most arrivals
(it starts at an arrival; ties: the earliest); the window is cut into one-minute bins and the rate
is the ``percentile``-th percentile (linear interpolation) of the bins' rates. Minutes, not
seconds: a server's queue absorbs a one-second burst, and per-second counts of a few requests are
mostly Poisson noise (their 99th percentile is a multiple of the mean at low rates). A trace
shorter than an hour is its whole span (``whole_trace``), in bins of at least a minute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from omniplane.errors import InputError

HOUR_S = 3600.0
BIN_S = 60.0


@dataclass(frozen=True)
class PeakRate:
    start_s: float  # the busiest hour, in the trace's own seconds
    end_s: float
    window_s: float  # end_s - start_s: an hour, or the whole span of a shorter trace
    bin_s: float  # the width of each bin (a minute; a short trace's span split into whole minutes)
    percentile: float
    rate: float  # req/s: the percentile of the bins' counts / bin_s
    arrivals: int  # arrivals in the window
    whole_trace: bool  # the trace is shorter than an hour: the window is all of it

    def to_json(self) -> dict[str, float | int | bool]:
        return {"hour_start_s": round(self.start_s, 3), "hour_end_s": round(self.end_s, 3),
                "window_s": round(self.window_s, 3), "bin_s": round(self.bin_s, 3),
                "percentile": self.percentile, "rate": round(self.rate, 4), "arrivals": self.arrivals,
                "whole_trace": self.whole_trace}


def peak_rate(arrival: np.ndarray, percentile: float, *, source: str = "trace",
              hour_s: float = HOUR_S, bin_s: float = BIN_S) -> PeakRate:
    """The ``percentile``-th percentile (0 < P <= 100) of the per-``bin_s`` arrival rate within the
    busiest ``hour_s`` window of ``arrival`` (seconds, non-decreasing). ``source`` names the trace
    in the error a trace with fewer than two arrivals, or one instant, raises."""
    if not 0 < percentile <= 100:
        raise InputError(f"percentile: expected a number in (0, 100], got {percentile!r}")
    t = np.asarray(arrival, dtype=float)
    if len(t) < 2 or not t[-1] > t[0]:
        raise InputError(f"{source}: expected at least two arrivals at different times for a rate; "
                         f"it has {len(t)} request(s)" + (f" spanning {t[-1] - t[0]:g} s" if len(t) else ""))
    if np.any(np.diff(t) < 0):
        raise InputError(f"{source}: expected arrival times in non-decreasing order")
    span = float(t[-1] - t[0])
    whole = span < hour_s
    if whole:
        start, window = float(t[0]), span
        inside = t
    else:
        ends = np.searchsorted(t, t + hour_s, side="left")  # arrivals in [t_i, t_i + hour)
        i = int(np.argmax(ends - np.arange(len(t))))
        start, window = float(t[i]), hour_s
        inside = t[i:ends[i]]
    bins = max(1, math.floor(window / bin_s + 1e-9))
    width = window / bins
    index = np.minimum(((inside - start) / width).astype(int), bins - 1)  # a short trace's last arrival
    rates = np.bincount(index, minlength=bins) / width
    return PeakRate(start, start + window, window, width, percentile,
                    float(np.percentile(rates, percentile)), len(inside), whole)
