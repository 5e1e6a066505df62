"""The cost model: time of every component on every executor config, and executor memory.

Two sources, measured first: a :class:`ProfileSet` table for the (component, GPU kind, TP, op)
wins inside its measured grid; everything else comes from the roofline
(:mod:`omniplane.perf.roofline`) with the per-kind efficiency factors of a
:class:`Calibration` (the shipped one by default).

Outside a table's grid the cost model does not extrapolate the table: by default it scales the
roofline to the nearest measured point (``roofline(query) x measured(anchor) /
roofline(anchor)``) and records the query in :meth:`CostModel.fallbacks`; with
``strict_profiles=True`` it raises :class:`OutsideProfile` instead.

All times are seconds for ONE executor (``cfg.tp`` GPUs) running the batch. Components of a
merged executor run back to back on the same GPUs: the executor's iteration time is the sum of
its components' times, and its footprint adds all their weights.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from omniplane.perf.factors import Calibration, Efficiency, load_calibration
from omniplane.perf.memory import MemoryPolicy, check_fits, footprint
from omniplane.perf.profiles import Lookup, ProfileSet
from omniplane.perf.roofline import (
    LLMCoeffs,
    Rates,
    decode_span,
    dit_work,
    encoder_host_time,
    encoder_work,
    llm_coeffs,
    time_of,
    vae_work,
    vocoder_work,
)
from omniplane.perf.runtime import Runtime
from omniplane.perf.shapes import Shape, shape_of, with_output_bytes
from omniplane.perf.span import DecodeSpan, TableSpan
from omniplane.perf.types import ExecutorConfig, MemoryFootprint, OutsideProfile, Work
from omniplane.spec import ComponentKind, GeneratorKind, ModelSpec

# Forward passes per denoising step (classifier-free guidance doubles them), by (model, component).
GUIDANCE_PASSES: Mapping[tuple[str, str], tuple[float, str]] = {
    ("qwen-image", "dit"): (2.0, "https://github.com/sgl-project/sglang (QwenImageSamplingParams: "
                                 "negative_prompt ' ', guidance_scale 4.0: true CFG, 2 forwards/step)"),
    ("bagel", "gen"): (2.0, "assumption: BAGEL text CFG (cfg_text_scale 4.0 in the repository's "
                            "inference defaults) adds one unconditional forward per step"),
}


@dataclass(frozen=True)
class Fallback:
    """A query answered outside a profile table's grid (roofline scaled to ``anchor``)."""

    component: str
    gpu: str
    tp: int
    op: str
    batch: float
    size: float
    anchor_batch: int
    anchor_size: float


class CostModel:
    """Costs of one model's components. Cheap to call: per-(component, GPU kind, TP) constants
    are folded once and cached on the instance (GPU kinds are told apart by name)."""

    def __init__(self, model: ModelSpec, *, profiles: ProfileSet | None = None,
                 calibration: Calibration | None = None, memory: MemoryPolicy | None = None,
                 guidance_passes: Mapping[str, float] | None = None,
                 strict_profiles: bool = False, runtime: str | Runtime | None = None) -> None:
        self.model = model
        self.profiles = profiles or ProfileSet()
        self.calibration = calibration or load_calibration()
        self.runtime = runtime if isinstance(runtime, Runtime) else self.calibration.runtime(runtime)
        self.memory = memory or MemoryPolicy()
        self.strict_profiles = strict_profiles
        self._profiled = bool(self.profiles)
        self._shapes = {c.name: with_output_bytes(model, shape_of(c)) for c in model.components}
        self._passes = ({c: p for (m, c), (p, _) in GUIDANCE_PASSES.items() if m == model.name}
                        if self.runtime.guidance else {})
        self._passes.update(guidance_passes or {})
        self._llm: dict[tuple[str, str, int], LLMCoeffs] = {}
        self._rates: dict[str, tuple[Rates, Efficiency]] = {}
        self._fallbacks: dict[Fallback, None] = {}

    # ---- lookups --------------------------------------------------------------------------
    def shape(self, component: str) -> Shape:
        try:
            return self._shapes[component]
        except KeyError:
            raise KeyError(f"model {self.model.name!r} has no component {component!r}") from None

    def efficiency(self, cfg: ExecutorConfig) -> Efficiency:
        return self._kind(cfg)[1]

    def _kind(self, cfg: ExecutorConfig) -> tuple[Rates, Efficiency]:
        hit = self._rates.get(cfg.gpu.name)
        if hit is None:
            eff = self.calibration.for_gpu(cfg.gpu)
            hit = self._rates[cfg.gpu.name] = (Rates.of(cfg.gpu, eff), eff)
        return hit

    def guidance_passes(self, component: str) -> float:
        """Forward passes per denoising step of a DiT (2 with classifier-free guidance where the
        model's defaults use it and the runtime applies it)."""
        return self._passes.get(component, 1.0)

    def _coeffs(self, component: str, cfg: ExecutorConfig) -> LLMCoeffs:
        key = (component, cfg.gpu.name, cfg.tp)
        co = self._llm.get(key)
        if co is None:
            shape = self.shape(component)
            if shape.kind is not ComponentKind.LLM:
                raise ValueError(f"{component!r} is a {shape.kind}, not an llm")
            co = self._llm[key] = llm_coeffs(shape, cfg.gpu, cfg.tp, self.efficiency(cfg), self.runtime)
        return co

    def time_of(self, work: Work, cfg: ExecutorConfig) -> float:
        """Roofline time of ``work`` (per-GPU quantities) on ``cfg``."""
        return time_of(work, self._kind(cfg)[0])

    def source_of(self, component: str, cfg: ExecutorConfig, op: str) -> str:
        """'profile' when a measured table exists for the group, else 'roofline'."""
        names = (cfg.gpu.name, *cfg.gpu.aliases)
        return "profile" if self.profiles.has(component, names, cfg.tp, op) else "roofline"

    def fallbacks(self) -> list[Fallback]:
        """Queries answered outside a measured grid (roofline scaled to the nearest point)."""
        return list(self._fallbacks)

    # ---- autoregressive components ----------------------------------------------------------
    def llm_iteration_work(self, component: str, cfg: ExecutorConfig, *, prefill_tokens: int = 0,
                           prefill_context: int = 0, decode_batch: int = 0,
                           decode_context: int = 0, prefill_requests: int = 1) -> Work:
        """Roofline inputs of one iteration; scaled to the measured time when a table covers it."""
        work = self._coeffs(component, cfg).work(prefill_tokens, prefill_context, prefill_requests,
                                                 decode_batch, decode_context)
        if not self._profiled:
            return work
        t_roof = self.time_of(work, cfg)
        t = self.llm_iteration_time(component, cfg, prefill_tokens=prefill_tokens,
                                    prefill_context=prefill_context, decode_batch=decode_batch,
                                    decode_context=decode_context, prefill_requests=prefill_requests)
        return work.scaled(t / t_roof) if t_roof > 0 and t != t_roof else work

    def llm_iteration_time(self, component: str, cfg: ExecutorConfig, *, prefill_tokens: int = 0,
                           prefill_context: int = 0, decode_batch: int = 0,
                           decode_context: int = 0, prefill_requests: int = 1) -> float:
        """One continuous-batching iteration: ``prefill_tokens`` new prompt tokens (from
        ``prefill_requests`` requests) attending to ``prefill_context`` cached tokens (sum), plus
        ``decode_batch`` sequences decoding one token each over ``decode_context`` KV tokens."""
        co = self._llm.get((component, cfg.gpu.name, cfg.tp)) or self._coeffs(component, cfg)
        roof = co.time(prefill_tokens, prefill_context, prefill_requests, decode_batch, decode_context)
        if not self._profiled:
            return roof
        names = (cfg.gpu.name, *cfg.gpu.aliases)
        t_pf = t_dec = None
        if prefill_tokens > 0 and self.profiles.has(component, names, cfg.tp, "prefill"):
            r = max(1, prefill_requests)
            t_pf = self._measured(component, cfg, "prefill", r, prefill_tokens / r,
                                  lambda b, s: co.time(int(b * s), 0, int(b), 0, 0))
            # the table starts from an empty cache: add the roofline's cost of cached context
            t_pf += co.time(prefill_tokens, prefill_context, r, 0, 0) - co.time(prefill_tokens, 0, r, 0, 0)
        if decode_batch > 0 and self.profiles.has(component, names, cfg.tp, "decode"):
            t_dec = self._measured(component, cfg, "decode", decode_batch,
                                   decode_context / decode_batch,
                                   lambda b, s: co.time(0, 0, 1, int(b), int(b * s)))
        if t_pf is None and t_dec is None:
            return roof
        if t_pf is None:
            t_pf = co.time(prefill_tokens, prefill_context, prefill_requests, 0, 0) if prefill_tokens else 0.0
        if t_dec is None:
            t_dec = co.time(0, 0, 1, decode_batch, decode_context) if decode_batch else 0.0
        if t_pf and t_dec:  # one iteration: its fixed overhead is counted once
            return max(t_pf + t_dec - co.fixed_s, t_pf, t_dec)
        return t_pf + t_dec

    def llm_iteration_fn(self, component: str,
                         cfg: ExecutorConfig) -> Callable[[int, int, int, int, int], float]:
        """:meth:`llm_iteration_time` of ``component`` on ``cfg`` as a positional function of
        ``(prefill_tokens, prefill_context, prefill_requests, decode_batch, decode_context)``, for
        a caller pricing every iteration of one executor (the simulator): the same numbers without
        the per-call lookups (under the roofline it is the coefficients' own ``time``)."""
        co = self._coeffs(component, cfg)
        if not self._profiled:
            return co.time

        def price(pt: int, pc: int, pr: int, db: int, dc: int) -> float:
            return self.llm_iteration_time(component, cfg, prefill_tokens=pt, prefill_context=pc,
                                           prefill_requests=pr, decode_batch=db, decode_context=dc)
        return price

    def llm_decode_span(self, component: str, cfg: ExecutorConfig, batch: int, context: int,
                        iterations: int) -> DecodeSpan:
        """``iterations`` consecutive decode-only iterations of ``batch`` sequences whose KV
        context sums to ``context`` at the first and grows by ``batch`` per iteration; iteration
        ``i`` takes what ``llm_iteration_time`` says for it (closed form under the roofline)."""
        if self._profiled:
            out, t = [], 0.0
            for i in range(iterations):
                t += self.llm_iteration_time(component, cfg, decode_batch=batch,
                                             decode_context=context + i * batch)
                out.append(t)
            return TableSpan(tuple(out))
        co = self._llm.get((component, cfg.gpu.name, cfg.tp)) or self._coeffs(component, cfg)
        return decode_span(co, batch, context, iterations)

    def prefill_time(self, component: str, cfg: ExecutorConfig, tokens: int, context: int = 0,
                     requests: int = 1) -> float:
        return self.llm_iteration_time(component, cfg, prefill_tokens=tokens, prefill_context=context,
                                       prefill_requests=requests)

    def mtp_time(self, component: str, cfg: ExecutorConfig, seqs: int) -> float:
        """The MTP module's share of an iteration in which ``seqs`` sequences emit a frame: its
        sequential residual-codebook passes (0 for an LLM without one). Part of every
        :meth:`llm_iteration_time`; reported separately for comparison with measurements
        that list it apart (the Qwen3-Omni report's "MTP ms per token")."""
        co = self._llm.get((component, cfg.gpu.name, cfg.tp)) or self._coeffs(component, cfg)
        flops, nbytes, fixed = co._mtp(seqs)
        return max(max(flops / co.rates.flops, nbytes / co.rates.bytes) + fixed, co.host_floor(seqs))

    def decode_step_time(self, component: str, cfg: ExecutorConfig, batch: int, context_tokens: int) -> float:
        """One decode step of ``batch`` sequences reading ``context_tokens`` KV tokens in total. A
        talker with an MTP module includes its sequential residual-codebook passes (one frame)."""
        return self.llm_iteration_time(component, cfg, decode_batch=batch, decode_context=context_tokens)

    # ---- encoders and generators ------------------------------------------------------------
    def encoder_work(self, component: str, cfg: ExecutorConfig, items: int, tokens: float) -> Work:
        return encoder_work(self._kinded(component, ComponentKind.ENCODER), cfg.gpu, cfg.tp,
                            self.efficiency(cfg), items, tokens, self.runtime)

    def encoder_host_time(self, component: str, items: int, tokens: float,
                          frames_per_token: float = 1.0) -> float:
        """The runtime's host preprocessing of ``items`` inputs producing ``tokens`` tokens (of a
        video: ``frames_per_token`` frames each, the temporal patch); it overlaps the GPU (the
        encoder's throughput is bounded by the slower of the two)."""
        return encoder_host_time(self._kinded(component, ComponentKind.ENCODER), self.runtime, tokens,
                                 frames_per_token)

    def encoder_time(self, component: str, cfg: ExecutorConfig, items: int, tokens: float) -> float:
        """GPU time of one batch of ``items`` inputs producing ``tokens`` LLM tokens in total."""
        return self._timed(component, cfg, "encoder", items, tokens / max(items, 1),
                           lambda b, s: self.time_of(self.encoder_work(component, cfg, int(b), b * s), cfg))

    def dit_work(self, component: str, cfg: ExecutorConfig, batch: int, tokens: float) -> Work:
        return dit_work(self._kinded(component, GeneratorKind.DIT), cfg.gpu, cfg.tp,
                        self.efficiency(cfg), batch, tokens, self.guidance_passes(component), self.runtime)

    def dit_step_time(self, component: str, cfg: ExecutorConfig, batch: int, tokens: float) -> float:
        """One denoising step of ``batch`` images of ``tokens`` latent tokens each, including the
        extra forward of classifier-free guidance where the model uses it
        (:meth:`guidance_passes`)."""
        return self._timed(component, cfg, "dit_step", batch, tokens,
                           lambda b, s: self.time_of(self.dit_work(component, cfg, int(b), s), cfg))

    def vocoder_work(self, component: str, cfg: ExecutorConfig, batch: int, audio_seconds: float) -> Work:
        return vocoder_work(self._kinded(component, GeneratorKind.VOCODER), self.efficiency(cfg),
                            cfg.tp, batch, audio_seconds, self.runtime)

    def vocoder_time(self, component: str, cfg: ExecutorConfig, batch: int, audio_seconds: float) -> float:
        """Voicing ``audio_seconds`` of audio for each of ``batch`` streams (a chunk or a whole
        utterance)."""
        return self._timed(component, cfg, "vocoder", batch, audio_seconds,
                           lambda b, s: self.time_of(self.vocoder_work(component, cfg, int(b), s), cfg))

    def vae_work(self, component: str, cfg: ExecutorConfig, batch: int, pixels: float) -> Work:
        return vae_work(self._kinded(component, GeneratorKind.VAE), self.efficiency(cfg), cfg.tp,
                        batch, pixels, self.runtime)

    def vae_time(self, component: str, cfg: ExecutorConfig, batch: int, pixels: float) -> float:
        """Decoding ``batch`` latents into images of ``pixels`` pixels each."""
        return self._timed(component, cfg, "vae", batch, pixels,
                           lambda b, s: self.time_of(self.vae_work(component, cfg, int(b), s), cfg))

    def _kinded(self, component: str, kind: ComponentKind | GeneratorKind) -> Shape:
        shape = self.shape(component)
        if kind not in (shape.kind, shape.generator):
            what = shape.generator or shape.kind
            raise ValueError(f"{component!r} is a {what}, not a {kind}")
        return shape

    # ---- profile tables ---------------------------------------------------------------------
    def _timed(self, component: str, cfg: ExecutorConfig, op: str, batch: float, size: float,
               roofline: Callable[[float, float], float]) -> float:
        if self._profiled and self.profiles.has(component, (cfg.gpu.name, *cfg.gpu.aliases), cfg.tp, op):
            return self._measured(component, cfg, op, batch, size, roofline)
        return roofline(batch, size)

    def _measured(self, component: str, cfg: ExecutorConfig, op: str, batch: float, size: float,
                  roofline: Callable[[float, float], float]) -> float:
        hit: Lookup | None = self.profiles.lookup(component, (cfg.gpu.name, *cfg.gpu.aliases),
                                                  cfg.tp, op, batch, size)
        assert hit is not None
        if hit.inside:
            return hit.latency_s
        where = (f"{component} {op} on {cfg.gpu.name} x{cfg.tp} at batch {batch:g}, size {size:g} "
                 f"(nearest measured point: batch {hit.batch}, size {hit.size:g})")
        if self.strict_profiles:
            raise OutsideProfile(f"outside the measured profile grid: {where}")
        self._fallbacks[Fallback(component, cfg.gpu.name, cfg.tp, op, batch, size, hit.batch,
                                 hit.size)] = None
        anchor = roofline(hit.batch, hit.size)
        return roofline(batch, size) * (hit.latency_s / anchor) if anchor > 0 else hit.latency_s

    # ---- memory -----------------------------------------------------------------------------
    def footprint(self, components: Sequence[str], cfg: ExecutorConfig) -> MemoryFootprint:
        return footprint([self.shape(c) for c in components], cfg, self.memory)

    def check_fits(self, components: Sequence[str], cfg: ExecutorConfig) -> MemoryFootprint:
        """The footprint, or :class:`InfeasibleConfig` naming the executor, GPU, TP and bytes."""
        return check_fits([self.shape(c) for c in components], cfg, self.memory)

    def kv_capacity_tokens(self, components: Sequence[str], cfg: ExecutorConfig) -> int:
        """KV tokens the executor can hold for each of its LLMs; 0 if it hosts none."""
        return self.footprint(components, cfg).kv_capacity_tokens
