"""Decode spans: the times of consecutive decode-only iterations, in closed form.

In a decode-only stretch the batch stays the same and each sequence's context grows by one
token per iteration, so under the roofline one iteration takes
``t(i) = max(a1 + b1 i, a2 + b2 i) + k`` (compute and memory time are both linear in the
context). The end of iteration ``j`` (time from the span's start) is a sum of two arithmetic
series split where the lines cross: O(1), however long the span. The simulator runs such a
stretch as one event and, when work arrives meanwhile, cuts it at the first iteration that
ends at or after that moment (:meth:`cut_index`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class DecodeSpan(Protocol):
    @property
    def iterations(self) -> int: ...

    @property
    def total(self) -> float: ...

    def end(self, j: int) -> float: ...

    def cut_index(self, elapsed: float) -> int: ...


def _series(p: int, q: int, a: float, b: float) -> float:
    """sum_{i=p}^{q-1} (a + b i)."""
    n = q - p
    return n * a + b * n * (p + q - 1) / 2.0 if n > 0 else 0.0


@dataclass(frozen=True)
class LinearMaxSpan:
    """``t(i) = max(max(a1 + b1 i, a2 + b2 i) + k, floor)`` for ``i`` in ``0 .. iterations - 1``
    (``floor``: host work beside the GPU that an iteration cannot undercut; 0 for none)."""

    a1: float
    b1: float
    a2: float
    b2: float
    k: float
    iterations: int
    floor: float = 0.0

    def _line(self, i: int) -> float:
        return max(self.a1 + self.b1 * i, self.a2 + self.b2 * i) + self.k

    def end(self, j: int) -> float:
        j = max(0, min(j, self.iterations))
        if self.floor <= 0.0 or j == 0:
            return self._line_end(j)
        # the lines never fall (b1, b2 >= 0): the floor holds for the first c0 iterations
        lo, hi = 0, j
        while lo < hi:
            mid = (lo + hi) // 2
            if self._line(mid) >= self.floor:
                hi = mid
            else:
                lo = mid + 1
        return self.floor * lo + self._line_end(j) - self._line_end(lo)

    def _line_end(self, j: int) -> float:
        a1, b1, a2, b2 = self.a1, self.b1, self.a2, self.b2
        if b1 == b2:
            return _series(0, j, max(a1, a2), b1) + self.k * j
        # below the crossing the line with the smaller slope is the larger one
        (alo, blo), (ahi, bhi) = ((a1, b1), (a2, b2)) if b1 < b2 else ((a2, b2), (a1, b1))
        cross = (alo - ahi) / (bhi - blo)
        c = min(max(math.ceil(cross), 0), j)
        return _series(0, c, alo, blo) + _series(c, j, ahi, bhi) + self.k * j

    @property
    def total(self) -> float:
        return self.end(self.iterations)

    def cut_index(self, elapsed: float) -> int:
        """Smallest ``j`` in ``1 .. iterations`` whose end is at or after ``elapsed``."""
        lo, hi = 1, self.iterations
        while lo < hi:
            mid = (lo + hi) // 2
            if self.end(mid) >= elapsed:
                hi = mid
            else:
                lo = mid + 1
        return lo


@dataclass(frozen=True)
class TableSpan:
    """A span from explicit iteration end times (e.g. measured profile tables)."""

    bounds: Sequence[float]

    @property
    def iterations(self) -> int:
        return len(self.bounds)

    def end(self, j: int) -> float:
        return self.bounds[j - 1] if j > 0 else 0.0

    @property
    def total(self) -> float:
        return self.bounds[-1]

    def cut_index(self, elapsed: float) -> int:
        return next((i + 1 for i, b in enumerate(self.bounds) if b >= elapsed), len(self.bounds))
