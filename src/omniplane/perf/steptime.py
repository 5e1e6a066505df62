"""The iteration time of one measured serving engine, fitted to its own profile table.

:class:`~omniplane.perf.costmodel.CostModel` prices catalog components on catalog GPU kinds
(roofline + tables). A :class:`StepModel` prices *one engine that was profiled* (any hardware,
e.g. vLLM's CPU build serving the tiny fixture) from its profile table alone: no roofline, no
GPU kind. It is what the fidelity loop (``omniplane fidelity``) hands the simulator.

One continuous-batching iteration with ``n`` new prompt tokens from ``R`` prompts attending to
``C_p`` cached tokens, plus ``b`` sequences decoding one token each over ``C_d`` KV tokens::

    t = step                                    per iteration (schedule, inputs, launch, outputs)
      + prefill_token x n                       tokens through the weights
      + prefill_seq   x R                       per prompt finishing a chunk (sampling, bookkeeping)
      + prefill_attn  x (n C_p / R + n^2 / 2R)  query-key pairs of the chunk (the roofline's term)
      + decode_seq    x b                       per decoding sequence (its token and its output)
      + decode_ctx    x C_d                     KV tokens the decode attention reads

The coefficients are fitted by non-negative least squares on relative error to the table's
``prefill`` rows (batch R, size s: ``n = R s``, ``C_p = 0``) and ``decode`` rows (batch b, size c:
``C_d = b c``); every row's in-sample error is kept (:attr:`StepModel.fit`). A mixed iteration
counts ``step`` once.

**Mixed iterations** (a prefill chunk batched with decodes) are priced by the sum above plus
three terms that apply only when an iteration holds both, fitted to measured mixed iterations
(:class:`MixedRow`, e.g. :mod:`omniplane.fidelity.mixed`'s probe) and to nothing else::

      + mixed_step  x 1                         per mixed iteration
      + mixed_token x n                         per prompt token in a mixed iteration
      + mixed_seq   x b                         per decoding sequence in a mixed iteration

They are what the additive model gets wrong on that engine (positive: a mixed iteration costs more
than its parts, e.g. a second attention path; negative: the parts overlap), fitted by bounded least
squares on relative error to the residuals of the mixed rows after the rest of the model; each is
bounded below by the cost it could refund (``-step``, ``-prefill_token``, the cheapest measured
per-sequence decode cost), so no iteration is priced below zero. A term the rows cannot determine
(one chunk size: ``mixed_token``; one decode batch: ``mixed_seq``) is left at 0 and the notes say
so. Without mixed rows all three are 0 (the additive model, as before). Several prompt chunks in
one iteration count ``mixed_step`` once and ``mixed_token`` per token (an assumption: the probe
measures one chunk per iteration).

Inside the measured decode batches the table itself is the model, as in
:class:`~omniplane.perf.costmodel.CostModel`: ``decode_seq`` becomes a per-sequence cost
``k(b)`` read off each measured batch (what its rows leave after ``step`` and the context term,
averaged over contexts, the batch's total ``b k(b)`` kept non-decreasing in ``b``); between
measured batches the total is interpolated linearly, outside them ``k`` is held at the nearest
measured batch's (:attr:`StepModel.decode_curve`). A serving stack's per-sequence cost is not constant: on a
small CPU host the API server streaming every token competes with the engine, and the cost
per sequence grows with the batch. These are environment parameters (per-step and per-sequence overheads of
the serving stack on its host) fitted to every measured point at once, never to one.
Identifiability: decode rows at one context size cannot tell ``decode_ctx`` from
``decode_seq`` (``decode_ctx`` is then left out of the fit, :attr:`StepModel.notes` says so);
``prefill_seq`` is what a prefill iteration costs beyond ``step`` and its tokens, and prefill
rows at batch 1 cannot tell a per-prompt cost from a per-prefill-iteration one: it is charged
per prompt (assumption).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.optimize import lsq_linear, nnls

from omniplane.perf.profiles import ProfileRow
from omniplane.perf.span import LinearMaxSpan

FEATURES = ("step", "prefill_token", "prefill_seq", "prefill_attn", "decode_seq", "decode_ctx")
MIXED_FEATURES = ("mixed_step", "mixed_token", "mixed_seq")
_DECODE_SEQ, _DECODE_CTX = FEATURES.index("decode_seq"), FEATURES.index("decode_ctx")


def features(prefill_tokens: int, prefill_context: int, prefill_requests: int, decode_batch: int,
             decode_context: int) -> tuple[float, ...]:
    """The iteration's work in the units of :data:`FEATURES` (module docstring)."""
    n, b = float(prefill_tokens), float(decode_batch)
    r = float(max(1, prefill_requests)) if n > 0 else 0.0
    attn = (n * prefill_context / r + n * n / (2 * r)) if n > 0 else 0.0
    return (1.0, n, r, attn, b, float(decode_context) if b > 0 else 0.0)


def row_features(row: ProfileRow) -> tuple[float, ...]:
    if row.op == "prefill":
        return features(round(row.batch * row.size), 0, row.batch, 0, 0)
    if row.op == "decode":
        return features(0, 0, 1, row.batch, round(row.batch * row.size))
    raise ValueError(f"a step model is fitted to prefill and decode rows, not {row.op!r}")


@dataclass(frozen=True)
class RowFit:
    """One table row against the fitted model."""

    op: str
    batch: int
    size: float
    measured_ms: float
    fitted_ms: float

    @property
    def error(self) -> float:
        return (self.fitted_ms - self.measured_ms) / self.measured_ms


@dataclass(frozen=True)
class MixedRow:
    """One measured mixed iteration: ``decodes`` sequences decoding over ``context`` tokens each,
    batched with one whole ``chunk``-token prompt; ``latency_ms`` is the iteration's time."""

    decodes: int
    chunk: int
    context: float
    latency_ms: float
    source: str = ""

    def args(self) -> tuple[int, int, int, int, int]:
        return self.chunk, 0, 1, self.decodes, round(self.decodes * self.context)

    def to_json(self) -> dict[str, Any]:
        return {"decodes": self.decodes, "chunk": self.chunk, "context": round(self.context, 1),
                "ms": round(self.latency_ms, 3)}


@dataclass(frozen=True)
class EngineLimits:
    """What the simulator's LLM engine is configured with (the engine's own config)."""

    max_batch: int  # vLLM max_num_seqs
    token_budget: int  # vLLM max_num_batched_tokens
    kv_tokens: int  # KV cache blocks x block size


@dataclass(frozen=True)
class StepModel:
    """Iteration times of one profiled engine (module docstring); a ``CostSource`` for the
    simulator with one LLM component."""

    component: str
    coef_s: tuple[float, ...]  # seconds per unit of each of FEATURES
    limits: EngineLimits
    source: str = ""
    fit: tuple[RowFit, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    decode_curve: tuple[tuple[int, float], ...] = ()  # (batch, s for its b sequences), ascending
    mixed_s: tuple[float, float, float] = (0.0, 0.0, 0.0)  # MIXED_FEATURES, fitted to mixed rows
    mixed_fit: tuple[RowFit, ...] = ()  # op "mixed", batch = decodes, size = chunk

    def __post_init__(self) -> None:
        if len(self.coef_s) != len(FEATURES) or any(not c >= 0 for c in self.coef_s):
            raise ValueError(f"StepModel.coef_s: expected {len(FEATURES)} numbers >= 0, got {self.coef_s}")
        if len(self.mixed_s) != len(MIXED_FEATURES) or any(not abs(c) < float("inf") for c in self.mixed_s):
            raise ValueError(f"StepModel.mixed_s: expected {len(MIXED_FEATURES)} finite numbers, "
                             f"got {self.mixed_s}")

    def time(self, prefill_tokens: int = 0, prefill_context: int = 0, prefill_requests: int = 1,
             decode_batch: int = 0, decode_context: int = 0) -> float:
        x = features(prefill_tokens, prefill_context, prefill_requests, decode_batch, decode_context)
        t = float(sum(c * v for c, v in zip(self.coef_s, x, strict=True)))
        if self.decode_curve and decode_batch > 0:
            t += decode_batch * (self.per_seq(decode_batch) - self.coef_s[_DECODE_SEQ])
        if prefill_tokens > 0 and decode_batch > 0:
            m0, m1, m2 = self.mixed_s
            t += m0 + m1 * prefill_tokens + m2 * decode_batch
        return max(t, 0.0)

    def per_seq(self, batch: float) -> float:
        """Cost of one decoding sequence in a batch of ``batch`` (the curve, or ``decode_seq``)."""
        curve = self.decode_curve
        if not curve:
            return self.coef_s[_DECODE_SEQ]
        bs = [b for b, _ in curve]
        if batch <= bs[0]:
            return curve[0][1] / bs[0]
        if batch >= bs[-1]:
            return curve[-1][1] / bs[-1]
        j = bisect.bisect_right(bs, batch)
        (b0, t0), (b1, t1) = curve[j - 1], curve[j]
        return (t0 + (t1 - t0) * (batch - b0) / (b1 - b0)) / batch

    def coefficients(self) -> dict[str, float]:
        return dict(zip(FEATURES, self.coef_s, strict=True))

    def fit_errors(self) -> dict[str, float]:
        """Median and worst absolute in-sample error over the table's rows and the mixed rows."""
        errs = sorted(abs(f.error) for f in self.fit + self.mixed_fit)
        if not errs:
            return {}
        return {"median": float(np.median(errs)), "max": errs[-1], "rows": len(errs)}

    def to_json(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "coefficients_s": self.coefficients(),
            "decode_curve_s": [list(p) for p in self.decode_curve],
            "mixed_coefficients_s": dict(zip(MIXED_FEATURES, self.mixed_s, strict=True)),
            "mixed_rows": [{**f.__dict__, "error": f.error} for f in self.mixed_fit],
            "limits": self.limits.__dict__,
            "source": self.source,
            "fit_errors": self.fit_errors(),
            "rows": [{**f.__dict__, "error": f.error} for f in self.fit],
            "notes": list(self.notes),
        }

    # ---- the simulator's CostSource ---------------------------------------------------------
    def _check(self, component: str) -> None:
        if component != self.component:
            raise KeyError(f"this step model prices {self.component!r}, not {component!r}")

    def llm_iteration_time(self, component: str, cfg: Any, *, prefill_tokens: int = 0,
                           prefill_context: int = 0, decode_batch: int = 0, decode_context: int = 0,
                           prefill_requests: int = 1) -> float:
        self._check(component)
        return self.time(prefill_tokens, prefill_context, prefill_requests, decode_batch, decode_context)

    def llm_decode_span(self, component: str, cfg: Any, batch: int, context: int,
                        iterations: int) -> LinearMaxSpan:
        """Consecutive decode-only iterations: linear in the iteration index (context + i b)."""
        self._check(component)
        a = self.time(decode_batch=batch, decode_context=context)
        slope = self.coef_s[FEATURES.index("decode_ctx")] * batch
        return LinearMaxSpan(a, slope, a, slope, 0.0, iterations)

    def kv_capacity_tokens(self, components: Sequence[str], cfg: Any) -> int:
        return self.limits.kv_tokens

    def _not_llm(self, what: str) -> float:
        raise ValueError(f"a step model prices one LLM engine ({self.component}); it has no {what} time")

    def encoder_time(self, component: str, cfg: Any, items: int, tokens: int) -> float:
        return self._not_llm("encoder")

    def dit_step_time(self, component: str, cfg: Any, batch: int, tokens: int) -> float:
        return self._not_llm("DiT step")

    def vocoder_time(self, component: str, cfg: Any, batch: int, audio_seconds: float) -> float:
        return self._not_llm("vocoder")

    def vae_time(self, component: str, cfg: Any, batch: int, pixels: float) -> float:
        return self._not_llm("VAE")


def fit_step_model(rows: Sequence[ProfileRow], component: str, limits: EngineLimits,
                   source: str = "", mixed: Sequence[MixedRow] = ()) -> StepModel:
    """Fit :class:`StepModel` to the ``prefill`` and ``decode`` rows of ``component`` and its
    mixed terms to ``mixed`` (module docstring). Raises ``ValueError`` when the rows cannot
    determine an iteration time (no decode rows, or no prefill rows)."""
    mine = [r for r in rows if r.component == component and r.op in ("prefill", "decode")]
    ops = {r.op for r in mine}
    if ops != {"prefill", "decode"}:
        missing = sorted({"prefill", "decode"} - ops)
        raise ValueError(f"cannot fit a step model of {component!r}: the table has no "
                         f"{' and no '.join(missing)} rows (profile at least one prompt size at "
                         "concurrency 1 and one decode point)")
    x = np.array([row_features(r) for r in mine])
    y = np.array([r.latency_ms / 1e3 for r in mine])
    notes = []
    decode_ctx = {r.size for r in mine if r.op == "decode"}
    prefill_batches = {r.batch for r in mine if r.op == "prefill"}
    cols = list(range(len(FEATURES)))
    if len(decode_ctx) < 2:
        cols.remove(FEATURES.index("decode_ctx"))
        notes.append("decode rows at one context size: decode_ctx not determined, set to 0 "
                     "(its cost is inside decode_seq at that context)")
    if len(prefill_batches) < 2:
        notes.append("prefill rows at batch 1 only: prefill_seq (a prefill's cost beyond step and its "
                     "tokens) is charged per prompt, an assumption")
    # relative error: scale each row by 1 / measured
    a = x[:, cols] / y[:, None]
    sol, _ = nnls(a, np.ones(len(y)))
    coef = np.zeros(len(FEATURES))
    coef[cols] = sol
    coefs = tuple(float(c) for c in coef)
    curve = decode_curve([r for r in mine if r.op == "decode"], coefs)
    model = StepModel(component, coefs, limits, source, (), tuple(notes), curve)
    fit = tuple(RowFit(r.op, r.batch, r.size, r.latency_ms, 1e3 * model.time(*_row_args(r))) for r in mine)
    model = StepModel(component, coefs, limits, source, fit, tuple(notes), curve)
    return _fit_mixed(model, mixed) if mixed else model


def _fit_mixed(model: StepModel, mixed: Sequence[MixedRow]) -> StepModel:
    """``model`` with its mixed terms fitted to ``mixed`` (module docstring)."""
    y = np.array([m.latency_ms / 1e3 for m in mixed])
    base = np.array([model.time(*m.args()) for m in mixed])
    x = np.array([[1.0, float(m.chunk), float(m.decodes)] for m in mixed])
    cols = [0, 1, 2]
    notes = list(model.notes)
    if len({m.chunk for m in mixed}) < 2:
        cols.remove(1)
        notes.append("mixed rows at one chunk size: mixed_token not determined, set to 0")
    if len({m.decodes for m in mixed}) < 2:
        cols.remove(2)
        notes.append("mixed rows at one decode batch: mixed_seq not determined, set to 0")
    c = model.coef_s
    cheapest = min([t / b for b, t in model.decode_curve] or [c[_DECODE_SEQ]])
    lo = np.array([-c[0], -c[FEATURES.index("prefill_token")], -cheapest])[cols]
    sol = lsq_linear(x[:, cols] / y[:, None], (y - base) / y, bounds=(lo, np.full(len(cols), np.inf))).x
    coef = [0.0, 0.0, 0.0]
    for j, v in zip(cols, sol, strict=True):
        coef[j] = float(v)
    notes.append("mixed terms fitted to measured mixed iterations (one prompt chunk with n decodes)")
    out = replace(model, mixed_s=(coef[0], coef[1], coef[2]), notes=tuple(notes))
    fits = tuple(RowFit("mixed", m.decodes, m.chunk, m.latency_ms, 1e3 * out.time(*m.args())) for m in mixed)
    return replace(out, mixed_fit=fits)


def _row_args(row: ProfileRow) -> tuple[int, int, int, int, int]:
    if row.op == "prefill":
        return round(row.batch * row.size), 0, row.batch, 0, 0
    return 0, 0, 1, row.batch, round(row.batch * row.size)


def decode_curve(rows: Sequence[ProfileRow], coef: Sequence[float]) -> tuple[tuple[int, float], ...]:
    """The decode sequences' cost at each measured batch (module docstring): what each decode
    row leaves after ``step`` and the context term, averaged per batch, kept non-decreasing in
    the batch (pool-adjacent-violators)."""
    by_batch: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        rest = r.latency_ms / 1e3 - coef[0] - coef[_DECODE_CTX] * r.batch * r.size
        by_batch[r.batch].append(max(rest, 0.0))
    batches = sorted(by_batch)
    totals = [float(np.mean(by_batch[b])) for b in batches]
    blocks: list[list[float]] = []  # [sum of totals, count], merged while a later block is lower
    for t in totals:
        blocks.append([t, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s2, n2 = blocks.pop()
            blocks[-1][0] += s2
            blocks[-1][1] += n2
    mono = [s / n for s, n in blocks for _ in range(int(n))]
    return tuple(zip(batches, mono, strict=True))


def holdout_fits(rows: Sequence[ProfileRow], component: str, limits: EngineLimits,
                 mixed: Sequence[MixedRow] = ()) -> tuple[RowFit, ...]:
    """Leave-one-point-out check of the fit: for each measured point (op, batch, size; a mixed
    point is (``"mixed"``, decodes, chunk)), the model fitted to every *other* point predicts it
    (its rows' mean). A point whose removal leaves an op without rows cannot be checked and is
    skipped."""
    mine = [r for r in rows if r.component == component and r.op in ("prefill", "decode")]
    keys = sorted({(r.op, r.batch, r.size) for r in mine})
    out = []
    for key in keys:
        rest = [r for r in mine if (r.op, r.batch, r.size) != key]
        if {r.op for r in rest} != {"prefill", "decode"}:
            continue
        held = [r for r in mine if (r.op, r.batch, r.size) == key]
        model = fit_step_model(rest, component, limits, mixed=mixed)
        measured = float(np.mean([r.latency_ms for r in held]))
        out.append(RowFit(key[0], key[1], key[2], measured, 1e3 * model.time(*_row_args(held[0]))))
    if {r.op for r in mine} != {"prefill", "decode"}:
        return tuple(out)
    for n, k in sorted({(m.decodes, m.chunk) for m in mixed}):
        others = [m for m in mixed if (m.decodes, m.chunk) != (n, k)]
        held_m = [m for m in mixed if (m.decodes, m.chunk) == (n, k)]
        model = fit_step_model(mine, component, limits, mixed=others)
        predicted = float(np.mean([model.time(*m.args()) for m in held_m]))
        out.append(RowFit("mixed", n, k, float(np.mean([m.latency_ms for m in held_m])), 1e3 * predicted))
    return tuple(out)
