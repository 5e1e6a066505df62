"""Pareto pruning of per-type goodput vectors and the selection policy (Algorithm 2).

Policies come from one factory, :func:`selection_policy`; each maps goodput vectors
``[C, T]`` (and the type mix) to a score, highest wins.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Score = Callable[[np.ndarray, np.ndarray], np.ndarray]


def pareto_front(goodput: np.ndarray, tol: float = 0.0) -> np.ndarray:
    """Indices of the rows of ``goodput`` ``[C, T]`` that no kept row dominates (>= in every
    type; rows equal to an earlier row are kept once). With ``tol`` > 0 a row is only dropped
    when another is better by that margin in every type (``(1 - tol) g_other >= g``): plans
    within the estimate's error of the front survive."""
    if len(goodput) == 0:
        return np.zeros(0, dtype=int)
    order = np.argsort(-goodput.sum(axis=1), kind="stable")
    front: list[int] = []
    for i in order:
        g = goodput[i]
        if front:
            f = goodput[front]
            ge = (f * (1 - tol) >= g - 1e-12).all(axis=1)
            if ge.any():
                continue
        front.append(int(i))
    return np.array(sorted(front), dtype=int)


def _total(goodput: np.ndarray, pi: np.ndarray) -> np.ndarray:
    return np.asarray(goodput.sum(axis=1))


def _balanced(goodput: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """The smallest per-type goodput relative to the type's share of the traffic."""
    active = pi > 0
    return np.asarray((goodput[:, active] / pi[active]).min(axis=1))


POLICIES: dict[str, tuple[Score, str]] = {
    "total": (_total, "maximum total goodput (Cornfigurator's default)"),
    "balanced": (_balanced, "maximum of the smallest goodput / type share (no type starved)"),
}


def selection_policy(name: str) -> Score:
    """The scoring function of a named policy (see ``POLICIES``)."""
    try:
        return POLICIES[name][0]
    except KeyError:
        known = ", ".join(POLICIES)
        raise ValueError(f"unknown selection policy {name!r} (expected one of: {known})") from None
