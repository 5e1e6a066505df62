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
    within the estimate's error of the front survive.

    Rows are visited by decreasing total (only a row with a larger total can dominate), in
    blocks: a row is dropped if the front so far or an earlier row of its block dominates it.
    An earlier row that was itself dropped is dominated by a kept one, which then dominates
    this row too (``1 - tol <= 1``), so this is the row-by-row rule, vectorised."""
    n = len(goodput)
    if n == 0:
        return np.zeros(0, dtype=int)
    order = np.argsort(-goodput.sum(axis=1), kind="stable")
    scale = 1.0 - tol
    front = np.zeros((0, goodput.shape[1]))
    kept: list[np.ndarray] = []
    for start in range(0, n, PARETO_BLOCK):
        idx = order[start: start + PARETO_BLOCK]
        g = goodput[idx]
        dom = np.zeros(len(idx), dtype=bool)
        for f0 in range(0, len(front), PARETO_BLOCK * 8):
            f = front[f0: f0 + PARETO_BLOCK * 8] * scale
            hit = np.asarray((f[None, :, :] >= g[:, None, :] - 1e-12).all(axis=2))
            dom |= np.asarray(hit.any(axis=1))
        inner = (g[None, :, :] * scale >= g[:, None, :] - 1e-12).all(axis=2)  # [i, j]: j dominates i
        inner &= np.tri(len(idx), k=-1, dtype=bool)  # only earlier rows of the block
        dom |= inner.any(axis=1)
        kept.append(idx[~dom])
        front = np.concatenate([front, g[~dom]])
    return np.sort(np.concatenate(kept))


PARETO_BLOCK = 256


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


def bound_factor(name: str, arrivals: np.ndarray, pi: np.ndarray) -> float:
    """``f`` with ``score <= f x offered rate`` for every plan under policy ``name``, from the
    simulated sample's arrivals per type per unit of offered rate (``arrivals[t]``): a type's
    goodput is at most its arrivals over the window."""
    selection_policy(name)
    if name == "balanced":
        active = pi > 0
        return float((arrivals[active] / pi[active]).min()) if active.any() else 0.0
    return float(arrivals.sum())


def selection_policy(name: str) -> Score:
    """The scoring function of a named policy (see ``POLICIES``)."""
    try:
        return POLICIES[name][0]
    except KeyError:
        known = ", ".join(POLICIES)
        raise ValueError(f"unknown selection policy {name!r} (expected one of: {known})") from None
