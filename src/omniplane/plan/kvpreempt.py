"""KV preemption on a KV-tight LLM executor, for the Monte Carlo phase (an approximation,
labelled as one; docs/plan.md "Accuracy", session 7 round 2).

The mechanism (``omniplane.sim.llm``, like vLLM v1's scheduler in recompute mode): an
iteration first gives every decoding sequence one more KV token; when the cache cannot, the
most recently admitted running sequence is preempted (its KV freed, the prompt and the tokens
generated so far to be prefilled again) and put back at the head of the queue. The iteration
then admits waiting prompts, chunk by chunk, while any KV token is free, up to the configured
max batch ``b`` (not the planner's ``K / peak`` batch limit, which only the flow and admission
models use).

**When it happens.** The requests an LLM component holds (in service and waiting, Little's law)
are taken as Poisson with mean ``n`` (the same law as :func:`omniplane.plan.montecarlo.
node_states`' ``h_j``); at most ``b`` are resident. A resident sequence at a random moment of
its life holds ``x = prompt + U output`` KV tokens, ``U`` uniform on [0, 1] (linear decode
growth), so ``E[x] = m1 = E[prompt + output / 2]`` and ``E[x^2] = m2 = E[prompt^2 + prompt
output + output^2 / 3]``. Their KV demand ``D`` is compound Poisson with mean ``n' m1`` and
variance ``n' m2`` (``n' = min(n, b)``); the cache of ``K`` tokens overflows a share
``p = P(D > K)`` of the time, taken from the normal approximation of ``D``.

**What it costs.** While it overflows, every freed token is refilled at once by the head of
the queue, so every iteration must preempt again. The victim is the latest admission: first
the partial prefill admitted into the previous iteration's free space (its chunk is lost), and
when that no longer covers the ``d`` tokens the decoding sequences need, the youngest decoding
sequence, holding about ``H`` tokens. Its ``H`` freed tokens are then refilled and re-lost in
chunks ``H - d, H - 2d, ...``: over the ``H / d`` iterations of one cycle ``H + H^2 / (2 d)``
prefill tokens are computed and thrown away, about ``H / 2`` per iteration for ``H >> d``.
With ``H ~ m1`` (the youngest decoding sequence's context, approximated by the mean) and the
component's prefill time per token ``s_tok`` (its solo part's time to first output over its
mean prompt), each of its iterations is longer on average by ``p x s_tok x m1 / 2``.

The Monte Carlo phase adds that to the component's mean step (so the executor's other
components wait for it), to every further step of its own requests (their residence) and to
its busy share. Not modelled: the victims' own wait for readmission, the longer residual of
the mixed iterations, and the token budget capping a chunk (8,192 tokens, above ``m1 / 2`` on
every shipped workload). No factor is fitted to the planner's error.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfc

from omniplane.plan.parts import WorkArrays


def kv_moments(work: WorkArrays, comp: str) -> tuple[float, float, float]:
    """``(m1, m2, prompt)`` of one type's samples at LLM ``comp``: the mean and mean square of
    the KV tokens a resident sequence holds at a random moment (module docstring) and the mean
    prompt."""
    p = work.get(comp, "prompt_tokens")
    o = work.get(comp, "output_tokens")
    return float(np.mean(p + o / 2)), float(np.mean(p * p + p * o + o * o / 3)), float(np.mean(p))


def overflow_share(n: np.ndarray, m1: np.ndarray, m2: np.ndarray, kv: np.ndarray,
                   max_batch: np.ndarray) -> np.ndarray:
    """``P(D > K)``: the share of time the KV demand of ``min(n, b)`` resident sequences (Poisson,
    compound moments ``m1``, ``m2``) exceeds ``K = kv`` tokens, by the normal approximation; 0
    where nothing is held or no capacity is known (``kv <= 0``)."""
    res = np.minimum(np.maximum(n, 0.0), np.maximum(max_batch, 1))
    sd = np.sqrt(res * np.maximum(m2, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (kv - res * m1) / np.maximum(sd, 1e-300)
    p = 0.5 * erfc(z / np.sqrt(2.0))
    return np.where((res > 0) & (kv > 0) & (sd > 0), p, 0.0)


def recompute_per_step(p: np.ndarray, m1: np.ndarray, s_tok: np.ndarray) -> np.ndarray:
    """Mean recompute time each iteration of the component carries: ``p x s_tok x m1 / 2``
    (module docstring: about ``H / 2`` prefill tokens thrown away per overflowing iteration)."""
    return np.asarray(p * s_tok * m1 / 2.0)
