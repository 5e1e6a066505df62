"""The law of a request's wait before service, sampled per Monte Carlo sample.

Monte Carlo added each wait as its mean, one value per plan for every sample, so a plan whose
mean wait exceeded a type's target got attainment 0 and one whose mean was below it got every
sample's wait below it (docs/guides/plan.md, "Monte Carlo queueing"). In a queue the wait is 0 with the
probability that no one is ahead and otherwise spread out. Each part of the wait keeps its mean
exactly and gets a law from the mechanism that gives the mean (approximations, labelled as
such; nothing is fitted):

* **busy**: with the executor's busy probability (its busy share, capped at 1) the request
  lands in a step in progress and waits its residual, exponential with the mean residual given
  busy (the P-K mean residual over the busy probability; exponential is M/M's law, an
  approximation: a step's residual is bounded), plus the other hosted components' turns
  (their mean given busy, not spread);
* **queued** (the part ``step_queue_factor`` adds): with Erlang C's probability ``C(c, c u)``
  that all the node's ``c`` executors are busy (``u``: the full-batch utilisation the factor
  uses; M/G/1: ``u``), exponential with the mean that keeps the part's mean (M/M/c's law);
* **admission**: with the pooled chain's probability ``P(N >= B)`` that every slot is taken
  (``montecarlo.admission_chain``), exponential with the mean that keeps the Allen-Cunneen mean
  wait (M/M/c's law: given a wait, exponential).

The three events are nested through one uniform per sample (a full batch implies a busy
executor; the stationary states are ordered), the sizes given a wait are independent unit
exponentials. The draws are common random numbers: seeded by the request type and the
component only, the same for every candidate, plan and evaluation, so rankings do not move
with the draws; a sample's index picks its draw, so the first ``k`` samples (the screen's
prefix) get the same draws as in the full set.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

SEED = 14  # base seed of the wait draws (any fixed value: common random numbers)


@dataclass(frozen=True)
class WaitLaw:
    """One component's wait on one node: per candidate ``[C]`` the probability and mean of each
    part (the mean is unconditional: the part's contribution to the mean wait)."""

    p_busy: np.ndarray
    busy_mean: np.ndarray  # the residual of the step in progress (spread, exponential given busy)
    turns_mean: np.ndarray  # the other components' turns (not spread: their mean given busy)
    p_queued: np.ndarray
    queued_mean: np.ndarray
    p_admit: np.ndarray
    admit_mean: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        """The mean wait ``[C]`` (what Monte Carlo added before the waits were sampled)."""
        out: np.ndarray = self.busy_mean + self.turns_mean + self.queued_mean + self.admit_mean
        return out

    def sample(self, draws: np.ndarray) -> np.ndarray:
        """Sampled waits ``[C, K]`` for ``draws[4, K]`` (:func:`wait_draws`)."""
        u, e = draws[0][None, :], draws[1:]
        out: np.ndarray = np.where(u > 1.0 - self.p_busy[:, None],
                                   _given(self.turns_mean, self.p_busy)[:, None], 0.0)
        parts = ((self.p_busy, self.busy_mean), (self.p_queued, self.queued_mean),
                 (self.p_admit, self.admit_mean))
        for size, (p, mean) in zip(e, parts, strict=True):
            _add_part(out, u, size, p, mean)
        return out


def _given(mean: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The mean given the event (0 where the part is 0; infinite means stay infinite)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(mean > 0, mean / np.maximum(p, 1e-300), 0.0)
    return out


def _add_part(out: np.ndarray, u: np.ndarray, e: np.ndarray, p: np.ndarray, mean: np.ndarray) -> None:
    """Add one part to ``out[C, K]``: 0 unless the sample's uniform falls in the top ``p`` of its
    range, then a unit exponential times the mean given the event (mean kept: ``p x mean / p``).
    Only the candidates whose part has a positive mean are touched (the others add 0; most
    candidates have no admission queue, and this is Monte Carlo's hot path)."""
    rows = np.flatnonzero(mean > 0)
    if not len(rows):
        return
    p_r = p[rows][:, None]
    size = _given(mean[rows], p[rows])[:, None]
    with np.errstate(invalid="ignore"):
        out[rows] += np.where(u > 1.0 - p_r, size * e[None, :], 0.0)


def wait_draws(type_name: str, comp: str, k: int) -> np.ndarray:
    """``[4, k]`` draws for a type's samples at one component: row 0 the uniform that decides
    which parts of the wait occur (stratified: the ``k`` samples take one value in each of ``k``
    equal strata, in random order, so a probability ``p`` is met by ``p k`` samples up to one),
    rows 1-3 unit exponentials (the busy, queued and admission sizes)."""
    rng = np.random.default_rng([SEED, zlib.crc32(f"{type_name}/{comp}".encode())])
    u = (rng.permutation(k) + rng.random(k)) / k
    e = rng.exponential(1.0, size=(3, k))
    return np.concatenate([u[None, :], e])


def erlang_c(util: np.ndarray, servers: np.ndarray) -> np.ndarray:
    """Erlang C, the probability that all ``c = servers`` are busy in M/M/c at utilisation
    ``util`` (offered load ``c u``), by Erlang B's recursion ``B(k) = a B(k-1) / (k + a B(k-1))``;
    1 at ``u >= 1``."""
    u = np.clip(util, 0.0, 1.0)
    if not len(u):
        return np.zeros(0)
    c = servers.astype(int)
    a = c * u
    b = np.ones(len(u))
    for k in range(1, int(c.max()) + 1):
        nxt = a * b / (k + a * b)
        b = np.where(k <= c, nxt, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = b / (1.0 - u * (1.0 - b))
    return np.where(u < 1.0, np.nan_to_num(out, nan=0.0), 1.0)
