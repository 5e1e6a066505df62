"""Per-request service time of one component on one executor config at one batch occupancy.

A *part* is what the profiler would record for (component, TP, request type, batch): for each
sampled request, the service time until the component's first output and until it is done,
plus the executor-seconds the request costs at that occupancy (its throughput share) and the
mean step length (what a request arriving at a busy executor waits for). The planner's
flow, Monte Carlo and SLO phases read nothing else.

The formulas mirror how the simulator's engines run (``omniplane.sim``):

* LLM (continuous batching, ``sim/llm.py``): at occupancy ``B`` the request's prefill runs in
  an iteration that also decodes ``B - 1`` other sequences (chunked at the token budget); each
  later token is one iteration, whose length is a decode step of ``B`` sequences plus the
  prefills of the ``(B - 1) / o`` sequences that join per iteration. Cost per request: its
  marginal prefill + ``o x decode_step / B``. An LLM without output tokens only prefills, in
  batches of ``B`` prompts.
* Encoder (``EncoderEngine``): one batch of ``B`` requests; CPU preprocessing is kept apart
  (it delays the request but not the GPU, Cornfigurator section 5.2).
* Vocoder (``VocoderEngine``): streaming: a first chunk of one codec frame (batched, at
  ``B > 1``, with the longer rest jobs of other requests, since a batch runs as long as its
  longest job), then the rest; otherwise the whole utterance.
* DiT (``DiTEngine``): ``steps`` denoising steps of a batch of ``B``; VAE: one batch.

Context lengths of the other sequences in a batch are the type's mean (a type is tabulated on
its own; a node's mix re-weights the per-type parts, section 4.4).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.sim.llm import DEFAULT_TOKEN_BUDGET
from omniplane.spec import ComponentKind, GeneratorKind, ModelSpec
from omniplane.spec.work import ResolvedWork

DEFAULT_FRAME_S = 0.08  # as omniplane.sim.build.DEFAULT_FRAME_S (one 12.5 Hz codec frame)
GRID = 16  # sizes evaluated per part before interpolating (assumption: see _interpolated)


@dataclass(frozen=True)
class Part:
    first: np.ndarray  # [K] seconds of service until the first output
    done: np.ndarray  # [K] seconds of service until done
    cpu: np.ndarray  # [K] CPU preprocessing seconds (encoders; zeros otherwise)
    step: float  # mean length of one step at this occupancy (seconds)
    residence: float  # mean seconds a request occupies the component (Little's law)
    cost: float  # executor-seconds per request at this occupancy (1 / throughput)
    steps_first: np.ndarray  # [K] executor steps the request takes part in until its first output
    steps_done: np.ndarray  # [K] ... until done (a merged executor runs its other components between)
    step2: float = -1.0  # mean square of one step (P-K's residual); -1: constant steps (step^2)

    @property
    def step_sq(self) -> float:
        """``E[S^2]`` of one step at this occupancy (``step^2`` where the step does not vary)."""
        return self.step2 if self.step2 >= 0 else self.step ** 2


class WorkArrays:
    """A type's sampled work as arrays: component -> quantity -> [K]."""

    def __init__(self, samples: tuple[ResolvedWork, ...]) -> None:
        self.k = len(samples)
        comps = samples[0].keys()
        self.q: dict[str, dict[str, np.ndarray]] = {
            c: {name: np.array([s[c][name] for s in samples], dtype=float) for name in samples[0][c]}
            for c in comps
        }

    def get(self, comp: str, name: str) -> np.ndarray:
        return self.q[comp][name]


def streaming_into(model: ModelSpec, comp: str, path: list[str]) -> bool:
    """True when the component before ``comp`` on the path feeds it along a streaming edge."""
    for p in path:
        for e in model.component(p).edges:
            if e.to == comp:
                return e.streaming
    return False


def llm_ctx(w: WorkArrays, comp: str) -> float:
    """Mean KV tokens a sequence holds while it decodes (prompt + half its output)."""
    return float(np.mean(w.get(comp, "prompt_tokens") + w.get(comp, "output_tokens") / 2))


def llm_peak(w: WorkArrays, comp: str) -> float:
    """Mean KV tokens a sequence holds when it finishes (prompt + output): the simulator, like
    vLLM, admits prompts while the cache has room and preempts the latest sequence when
    decoding overflows it, so a batch stays whole only if every sequence fits at its peak."""
    return float(np.mean(w.get(comp, "prompt_tokens") + w.get(comp, "output_tokens")))


def compute_part(model: ModelSpec, cost: CostModel, comp: str, cfg: ExecutorConfig,
                 w: WorkArrays, batch: int, path: list[str], pool: Pool | None = None) -> Part:
    """The part of ``comp`` on ``cfg`` for one type's samples ``w`` at occupancy ``batch``.

    ``pool`` (DiT: latent tokens, VAE: pixels) holds the sizes of requests of every type this
    component serves, drawn in proportion to the type mix: a DiT or VAE batch runs as long as
    its largest member (the simulator pads to it), so each request's batch is padded to the
    largest of its own size and ``batch - 1`` draws from the pool."""
    c = model.component(comp)
    if c.kind is ComponentKind.LLM:
        if any(e.kv and e.to == comp for x in model.components for e in x.edges):
            return _decode_phase(cost, comp, cfg, w, batch)
        return _llm(cost, comp, cfg, w, batch)
    if c.kind is ComponentKind.ENCODER:
        return _encoder(model, cost, comp, cfg, w, batch)
    if c.generator is GeneratorKind.DIT:
        steps = w.get(comp, "steps")
        tokens = padded(w.get(comp, "tokens"), pool, batch)
        per = _interpolated(tokens, lambda x: 2 * (cost.dit_step_time(comp, cfg, batch, x),))[0]
        t = steps * per
        step = float(per.mean())
        return Part(t, t, np.zeros(w.k), step, float(t.mean()), float(steps.mean()) * step / batch,
                    steps, steps, float((per ** 2).mean()))
    if c.generator is GeneratorKind.VAE:
        pixels = padded(w.get(comp, "pixels"), pool, batch)
        t = _interpolated(pixels, lambda x: 2 * (cost.vae_time(comp, cfg, batch, x),))[0]
        one = np.ones(w.k)
        return Part(t, t, np.zeros(w.k), float(t.mean()), float(t.mean()), float(t.mean()) / batch, one, one,
                    float((t ** 2).mean()))
    return _vocoder(model, cost, comp, cfg, w, batch, path)


PAD_DRAWS = 64  # batch-mates drawn per request to estimate its padded size (assumption)


@dataclass(frozen=True)
class Pool:
    """The sizes a DiT or VAE batch-mate may have and the probability of each (they sum to 1)."""

    sizes: np.ndarray
    p: np.ndarray


def padded(own: np.ndarray, pool: Pool | None, batch: int) -> np.ndarray:
    """Expected size a request's batch is padded to: the mean over draws of the largest of its
    own size and ``batch - 1`` sizes drawn from ``pool``."""
    if pool is None or batch <= 1 or not len(pool.sizes):
        return own
    rng = np.random.default_rng(batch)
    mates = rng.choice(pool.sizes, size=(PAD_DRAWS, batch - 1), p=pool.p).max(axis=1)  # [D]
    return np.asarray(np.maximum(own[:, None], mates[None, :]).mean(axis=1))


def _llm(cost: CostModel, comp: str, cfg: ExecutorConfig, w: WorkArrays, batch: int) -> Part:
    prompts = w.get(comp, "prompt_tokens")
    outs = w.get(comp, "output_tokens")
    o_mean = float(outs.mean())
    ctx = llm_ctx(w, comp)
    if o_mean < 1:  # prefill only (a diffusion model's text encoder): batches of prompts
        p_mean = float(prompts.mean())
        mine = np.array([_prefill_batch(cost, comp, cfg, float(p) + (batch - 1) * p_mean, batch)
                         for p in prompts])
        whole = _prefill_batch(cost, comp, cfg, batch * p_mean, batch)
        chunks = np.ceil((prompts + (batch - 1) * p_mean) / DEFAULT_TOKEN_BUDGET)
        return Part(mine, mine, np.zeros(w.k), whole, float(mine.mean()), whole / batch, chunks, chunks)
    p_mean = float(prompts.mean())
    room = max(1.0, DEFAULT_TOKEN_BUDGET - batch)  # prefill tokens an iteration can take
    # steady state with `batch` sequences decoding: batch / o finish (and as many join) per
    # iteration, unless the token budget admits fewer prompts; then the batch stays smaller
    admit = min(batch / max(o_mean, 1.0), room / max(p_mean, 1.0))
    running = max(1, min(batch, round(admit * o_mean)))
    others = running - 1
    octx = int(others * ctx)
    extra = max(0.0, admit - 1.0)  # other prompts prefilled in the same iteration

    def prefill(tokens: float) -> tuple[float, float]:
        """Time of the iteration(s) holding this prompt, next to the others' prefills and decodes."""
        total, done = 0.0, 0
        share = min(extra * p_mean, room - min(tokens, room))
        while done < int(tokens):
            n = int(min(room, int(tokens) - done))
            total += cost.llm_iteration_time(comp, cfg, prefill_tokens=n + int(share), prefill_context=done,
                                             prefill_requests=1 + round(extra), decode_batch=others,
                                             decode_context=octx)
            done += n
            share = 0.0
        return total, total

    pf, _ = _interpolated(prompts, prefill)
    t_it, t_sq = _mean_iteration(cost, comp, cfg, prompts, admit, running, ctx, room)
    done_t = pf + np.maximum(outs - 1, 0) * t_it
    chunks = np.maximum(1.0, np.ceil(prompts / room))
    return Part(pf, done_t, np.zeros(w.k), t_it, float(done_t.mean()), t_it / admit, chunks,
                chunks + np.maximum(outs - 1, 0), t_sq)


def _decode_phase(cost: CostModel, comp: str, cfg: ExecutorConfig, w: WorkArrays, batch: int) -> Part:
    """A decode phase (prefill/decode disaggregation, ``omniplane.plan.disagg``): its prompt
    arrives as KV cache, so it joins decoding at once (its first token ends the iteration it
    joins) and every iteration is a decode step of ``batch`` sequences."""
    outs = w.get(comp, "output_tokens")
    o_mean = max(float(outs.mean()), 1.0)
    running = max(1, batch)
    ctx = llm_ctx(w, comp)
    t_it = cost.llm_iteration_time(comp, cfg, decode_batch=running, decode_context=int(running * ctx))
    first = np.full(w.k, t_it)
    done = first + np.maximum(outs - 1, 0) * t_it
    return Part(first, done, np.zeros(w.k), t_it, float(done.mean()), t_it * o_mean / running, np.ones(w.k),
                np.maximum(outs, 1.0))


ITERATIONS = 2000  # iterations of the prefill-token process averaged per LLM part (assumption)


def _mean_iteration(cost: CostModel, comp: str, cfg: ExecutorConfig, prompts: np.ndarray, admit: float,
                    running: int, ctx: float, room: float) -> tuple[float, float]:
    """Mean and mean square of the iteration time with ``running`` sequences decoding while
    prompts join at ``admit`` per iteration (Poisson), whole prompts at a time, prefilled up to
    ``room`` tokens per iteration with the rest carried to the next (the simulator's chunked
    prefill). The roofline's max(compute, memory) is convex in the tokens, so this mean exceeds
    the time of a mean iteration; the process reproduces the full-budget iterations a backlog
    creates. The mean square is what the wait for an iteration in progress depends on (the
    residual ``E[S^2] / (2 E[S])``: a prefill iteration is often ten times a decode one)."""
    grid = np.linspace(0.0, room, 13)
    p_mean = max(float(prompts.mean()), 1.0)
    times = np.array([cost.llm_iteration_time(comp, cfg, prefill_tokens=int(x),
                                              prefill_requests=max(1, round(x / p_mean)),
                                              decode_batch=running, decode_context=int(running * ctx))
                      for x in grid])
    rng = np.random.default_rng(running * 7919 + len(prompts))
    arrivals = rng.poisson(admit, ITERATIONS)
    sizes = rng.choice(prompts, size=int(arrivals.sum()))
    starts = np.concatenate([[0], np.cumsum(arrivals)[:-1]])
    per_iter = np.add.reduceat(np.concatenate([sizes, [0.0]]), starts) if len(sizes) else np.zeros(ITERATIONS)
    per_iter = np.where(arrivals > 0, per_iter, 0.0)
    served = np.empty(ITERATIONS)
    backlog = 0.0
    for i, new in enumerate(per_iter.tolist()):
        backlog += new
        take = backlog if backlog < room else room
        served[i] = take
        backlog -= take
    its = np.interp(served, grid, times)
    return float(its.mean()), float((its ** 2).mean())


def _interpolated(x: np.ndarray, fn: Callable[[float], tuple[float, float]],
                  grid: int = GRID) -> tuple[np.ndarray, np.ndarray]:
    """``fn`` at every value of ``x``: exactly when there are few distinct values, else on a
    geometric grid of ``GRID`` points interpolated linearly (cost-model times are smooth in
    the prompt length; this keeps a part at ~GRID cost-model calls instead of one per sample)."""
    uniq = np.unique(x)
    pts = uniq if len(uniq) <= grid else np.unique(np.geomspace(max(uniq[0], 1e-9), uniq[-1], grid))
    vals = np.array([fn(float(p)) for p in pts])
    if len(pts) == 1:
        return np.full(len(x), vals[0, 0]), np.full(len(x), vals[0, 1])
    return np.interp(x, pts, vals[:, 0]), np.interp(x, pts, vals[:, 1])


def _prefill_batch(cost: CostModel, comp: str, cfg: ExecutorConfig, tokens: float, requests: int) -> float:
    """Prefilling ``tokens`` prompt tokens of ``requests`` prompts, chunked at the token budget."""
    total, left = 0.0, math.ceil(tokens)
    while left > 0:
        n = min(DEFAULT_TOKEN_BUDGET, left)
        share = max(1, round(requests * n / max(tokens, 1.0)))
        total += cost.prefill_time(comp, cfg, n, 0, share)
        left -= n
    return total


def _encoder(model: ModelSpec, cost: CostModel, comp: str, cfg: ExecutorConfig, w: WorkArrays,
             batch: int) -> Part:
    items, tokens = w.get(comp, "items"), w.get(comp, "tokens")
    mi, mt = float(items.mean()), float(tokens.mean())
    gpu = np.empty(w.k)
    for n_items in np.unique(items):  # items are few small counts; tokens vary continuously
        sel = items == n_items
        n = float(n_items)

        def one(t: float, n: float = n) -> tuple[float, float]:
            x = cost.encoder_time(comp, cfg, round(n + (batch - 1) * mi), int(t + (batch - 1) * mt))
            return x, x

        gpu[sel] = _interpolated(tokens[sel], one, grid=6)[0]
    whole = cost.encoder_time(comp, cfg, max(1, round(batch * mi)), int(batch * mt))
    cpu = items * model.cpu_seconds_per_item(comp)
    single = np.ones(w.k)
    return Part(gpu, gpu, cpu, whole, float(gpu.mean()), whole / batch, single, single)  # one batch: constant


def _vocoder(model: ModelSpec, cost: CostModel, comp: str, cfg: ExecutorConfig, w: WorkArrays,
             batch: int, path: list[str]) -> Part:
    audio = w.get(comp, "audio_seconds")
    rate = model.component(comp).size.frame_rate_hz
    frame = 1.0 / rate if rate else DEFAULT_FRAME_S
    if streaming_into(model, comp, path):
        rest = np.maximum(audio - frame, 0.0)
        r_mean = float(rest.mean())
        head = cost.vocoder_time(comp, cfg, batch, frame if batch == 1 else r_mean)
        tail = _interpolated(rest, lambda r: 2 * (cost.vocoder_time(comp, cfg, batch, r),))[0]
        first = np.full(w.k, head)
        done = first + tail
        per = cost.vocoder_time(comp, cfg, batch, frame) + cost.vocoder_time(comp, cfg, batch, r_mean)
        # steps alternate a first chunk (head) and a rest of audio (tail)
        sq = (head ** 2 + float((tail ** 2).mean())) / 2
        return Part(first, done, np.zeros(w.k), per / 2, float(done.mean()), per / batch, np.ones(w.k),
                    np.where(rest > 0, 2.0, 1.0), sq)
    t = _interpolated(audio, lambda a: 2 * (cost.vocoder_time(comp, cfg, batch, a),))[0]
    whole = cost.vocoder_time(comp, cfg, batch, float(audio.mean()))
    one = np.ones(w.k)
    return Part(t, t, np.zeros(w.k), whole, float(t.mean()), whole / batch, one, one, float((t ** 2).mean()))
