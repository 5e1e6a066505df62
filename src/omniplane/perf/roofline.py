"""The roofline: per-iteration work of every component kind, and its time on a GPU.

    time = max(flops / (peak_flops x compute), bytes / (peak_bw x memory)) + overhead + comm

All quantities are per GPU of the executor. The per-(component, GPU kind, TP) constants are
folded once into small frozen coefficient records so that the hot paths are a few float
operations. Equations and their sources: docs/reference/perf.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from omniplane.perf.factors import Efficiency
from omniplane.perf.runtime import ROOFLINE, Runtime
from omniplane.perf.shapes import (
    ACT_BYTES,
    VAE_WORK_PER_LATENT,
    VOCODER_WORK_PER_FRAME,
    Shape,
)
from omniplane.perf.span import LinearMaxSpan
from omniplane.perf.types import Work
from omniplane.spec import GPUKind

ALLREDUCES_PER_LAYER = 2  # Megatron tensor parallelism: after attention and after the MLP
ALLTOALLS_PER_LAYER = 4  # Ulysses sequence parallelism: q, k, v in, attention output back
# assumption: kernels of one transformer layer in an inference engine (norms, QKV, rotary,
# attention, output projection, residual adds, gate/up, activation, down); the per-layer fixed
# time ``layer_s`` is spread over them (used to price single operators, e.g. Vidur's).
KERNELS_PER_LAYER = 15
# assumption: encoders attend within spans of at most 1024 positions: InternViT's 448 px tiles
# (32 x 32 patches of 14 px), Whisper-style audio windows (1500 frames per 30 s) are of this
# order, and Qwen2.5-VL's windowed ViT attends within even smaller windows in most layers.
ENCODER_ATTN_SPAN = 1024


@dataclass(frozen=True, slots=True)
class Rates:
    """Achievable rates of one GPU: FLOP/s and bytes/s after efficiency factors."""

    flops: float
    bytes: float

    @classmethod
    def of(cls, gpu: GPUKind, eff: Efficiency) -> Rates:
        return cls(gpu.flops * eff.compute, gpu.mem_bw * eff.memory)


def time_of(work: Work, rates: Rates) -> float:
    """Seconds for one iteration of ``work`` at ``rates``."""
    return max(work.flops / rates.flops, work.bytes / rates.bytes) + work.overhead_s + work.comm_s


def _collective_latency(n: int, tp: int, eff: Efficiency) -> float:
    return n * eff.allreduce_s * math.log2(tp) if tp > 1 else 0.0


def _allreduce_s_per_byte(gpu: GPUKind, tp: int, eff: Efficiency) -> float:
    """Ring all-reduce: each GPU sends 2 (tp-1)/tp of the message over its link."""
    return 2.0 * (tp - 1) / tp / (gpu.link_bw * eff.link) if tp > 1 else 0.0


def layer_time(eff: Efficiency, rt: Runtime) -> float:
    """Fixed time per transformer layer per forward: the runtime's, else the GPU kind's."""
    return eff.layer_s if rt.layer_s is None else rt.layer_s


def seq_time(eff: Efficiency, rt: Runtime) -> float:
    """Time per sequence emitting a token: the runtime's, else the GPU kind's."""
    return eff.per_seq_s if rt.per_seq_s is None else rt.per_seq_s


def expert_pool(shape: Shape, rt: Runtime) -> float:
    """Fraction of a MoE layer's experts one iteration's tokens route among: the runtime's
    routing skew, never below top-k of all experts (one token reads its k experts)."""
    return max(rt.moe_expert_pool, shape.active_experts / shape.experts)


@dataclass(frozen=True, slots=True)
class LLMCoeffs:
    """Constants of one autoregressive component on one executor config (per GPU), with the
    runtime's host costs folded in."""

    rates: Rates
    flops_per_token: float
    attn_flops_per_pair: float
    shared_bytes: float
    expert_bytes: float
    miss: float  # 1 - k/E for MoE (probability one token skips a given expert); 0 when dense
    moe: bool
    kv_bytes_per_token: float
    fixed_s: float  # per-iteration fixed time: layer time x layers + the runtime's step time
    per_seq_s: float
    comm_latency_s: float
    comm_s_per_token: float
    prompt_token_s: float = 0.0  # host time per prefilled token
    request_s: float = 0.0  # host time per request prefilled in the iteration
    # MTP module: per emitting sequence and pass (flops, bytes, fixed time) x passes; batched
    # passes read the weights and pay the fixed time once per pass for all sequences
    mtp_passes: int = 0
    mtp_flops: float = 0.0
    mtp_bytes: float = 0.0
    mtp_fixed_s: float = 0.0
    # host time per pass per emitting sequence; it runs beside the GPU (async scheduling), so an
    # iteration takes the larger of the two (:meth:`host_floor`)
    mtp_seq_s: float = 0.0
    mtp_batched: bool = True

    def _mtp(self, seqs: int) -> tuple[float, float, float]:
        """(flops, bytes, fixed seconds) of the MTP passes for ``seqs`` emitting sequences."""
        if not self.mtp_passes or seqs <= 0:
            return 0.0, 0.0, 0.0
        p = self.mtp_passes
        if self.mtp_batched:
            return p * seqs * self.mtp_flops, p * self.mtp_bytes, p * self.mtp_fixed_s
        return p * seqs * self.mtp_flops, p * seqs * self.mtp_bytes, p * seqs * self.mtp_fixed_s

    def host_floor(self, seqs: int) -> float:
        """The MTP passes' per-sequence host work for ``seqs`` emitting sequences (vLLM-Omni's
        per-request payloads and per-row sampling of each pass). The engine overlaps it with the
        GPU's work (async scheduling), so an iteration takes at least this long."""
        return self.mtp_passes * seqs * self.mtp_seq_s if self.mtp_passes and seqs > 0 else 0.0

    def work(self, prefill_tokens: int, prefill_context: int, prefill_requests: int,
             decode_batch: int, decode_context: int) -> Work:
        """One continuous-batching iteration (chunked prefill mixed with decode, as vLLM v1).

        Attention of the prefill chunk: ``prefill_tokens x prefill_context / R`` pairs against
        cached context plus ``prefill_tokens^2 / 2R`` causal pairs inside the chunk, for R equal
        prefill requests; each decoding sequence reads its whole context. Every sequence that
        emits a token (the decode batch and, counted as emitting, the prefill requests) runs the
        MTP module's passes after the main forward; their flops and bytes add to the
        iteration's.
        """
        tokens = prefill_tokens + decode_batch
        if tokens <= 0:
            return Work(0.0, 0.0, 0.0, 0.0)
        r = max(1, prefill_requests)
        pairs = (prefill_tokens * prefill_context + 0.5 * prefill_tokens * prefill_tokens) / r
        flops = self.flops_per_token * tokens + self.attn_flops_per_pair * (pairs + decode_context)
        weights = self.shared_bytes
        if self.moe:
            weights += self.expert_bytes * (1.0 - self.miss ** tokens)
        kv = self.kv_bytes_per_token * (prefill_context + decode_context + tokens)
        new = r if prefill_tokens > 0 else 0
        seqs = decode_batch + new
        mf, mb, mk = self._mtp(seqs)
        host = (self.fixed_s + self.per_seq_s * seqs + self.prompt_token_s * prefill_tokens
                + self.request_s * new + mk)
        comm = self.comm_latency_s + self.comm_s_per_token * tokens
        floor = self.host_floor(seqs)
        if floor > 0.0:  # the overlapped host work shows as overhead only where it exceeds the rest
            t = max((flops + mf) / self.rates.flops, (weights + kv + mb) / self.rates.bytes) + host + comm
            host += max(0.0, floor - t)
        return Work(flops + mf, weights + kv + mb, host, comm)

    def time(self, prefill_tokens: int, prefill_context: int, prefill_requests: int,
             decode_batch: int, decode_context: int) -> float:
        """``time_of(self.work(...))`` without building the Work (the planner's hot path)."""
        tokens = prefill_tokens + decode_batch
        if tokens <= 0:
            return 0.0
        r = prefill_requests if prefill_requests > 1 else 1
        pairs = (prefill_tokens * prefill_context + 0.5 * prefill_tokens * prefill_tokens) / r
        flops = self.flops_per_token * tokens + self.attn_flops_per_pair * (pairs + decode_context)
        weights = self.shared_bytes + (self.expert_bytes * (1.0 - self.miss ** tokens) if self.moe else 0.0)
        nbytes = weights + self.kv_bytes_per_token * (prefill_context + decode_context + tokens)
        new = r if prefill_tokens > 0 else 0
        seqs = decode_batch + new
        host = (self.fixed_s + self.per_seq_s * seqs + self.prompt_token_s * prefill_tokens
                + self.request_s * new)
        if self.mtp_passes:
            mf, mb, mk = self._mtp(seqs)
            flops, nbytes, host = flops + mf, nbytes + mb, host + mk
        t_c, t_m = flops / self.rates.flops, nbytes / self.rates.bytes
        t = (t_c if t_c > t_m else t_m) + host + self.comm_latency_s + self.comm_s_per_token * tokens
        if self.mtp_seq_s > 0.0:
            floor = self.host_floor(seqs)
            return floor if floor > t else t
        return t


def decode_span(co: LLMCoeffs, batch: int, context0: int, iterations: int) -> LinearMaxSpan:
    """``co.time(0, 0, 1, batch, context0 + i * batch)`` for i in 0..iterations-1 as a closed-form
    span: compute and memory time are both linear in i (the batch stays, each sequence's context
    grows by one token per iteration; the MTP passes and their host floor are the same every
    iteration)."""
    weights = co.shared_bytes + (co.expert_bytes * (1.0 - co.miss ** batch) if co.moe else 0.0)
    mf, mb, mk = co._mtp(batch)
    rf, rb = co.rates.flops, co.rates.bytes
    return LinearMaxSpan(
        a1=(co.flops_per_token * batch + co.attn_flops_per_pair * context0 + mf) / rf,
        b1=co.attn_flops_per_pair * batch / rf,
        a2=(weights + co.kv_bytes_per_token * (context0 + batch) + mb) / rb,
        b2=co.kv_bytes_per_token * batch / rb,
        k=(co.fixed_s + co.per_seq_s * batch + mk + co.comm_latency_s
           + co.comm_s_per_token * batch),
        iterations=iterations,
        floor=co.host_floor(batch),
    )


def llm_coeffs(shape: Shape, gpu: GPUKind, tp: int, eff: Efficiency, rt: Runtime = ROOFLINE) -> LLMCoeffs:
    """Tensor parallelism shards weights, heads and FLOPs over ``tp`` GPUs (the MTP module's
    too); KV heads are replicated when tp exceeds their number."""
    heads_per_rank = math.ceil(shape.kv_heads / tp)
    moe = shape.experts > 0
    lt = layer_time(eff, rt)
    pool = expert_pool(shape, rt) if moe else 1.0
    rates = Rates.of(gpu, eff)
    if rt.memory is not None:
        rates = Rates(rates.flops, gpu.mem_bw * rt.memory)
    return LLMCoeffs(
        rates=rates,
        flops_per_token=2.0 * shape.matmul_params / tp,
        attn_flops_per_pair=shape.attn_flops_per_pair / tp,
        shared_bytes=shape.shared_bytes / tp,
        expert_bytes=shape.expert_bytes * pool / tp,
        miss=1.0 - shape.active_experts / (shape.experts * pool) if moe else 0.0,
        moe=moe,
        kv_bytes_per_token=shape.kv_bytes_per_token * heads_per_rank / shape.kv_heads,
        fixed_s=lt * shape.layers + rt.step_s_on(gpu.name),
        per_seq_s=seq_time(eff, rt),
        comm_latency_s=_collective_latency(ALLREDUCES_PER_LAYER * shape.layers, tp, eff),
        comm_s_per_token=ALLREDUCES_PER_LAYER * shape.layers * shape.hidden * ACT_BYTES
        * _allreduce_s_per_byte(gpu, tp, eff),
        prompt_token_s=rt.prompt_token_s,
        request_s=rt.request_s,
        mtp_passes=shape.mtp_passes,
        mtp_flops=2.0 * shape.mtp_params / tp,
        mtp_bytes=shape.mtp_bytes / tp,
        mtp_fixed_s=lt * shape.mtp_layers + rt.mtp_pass_s,
        mtp_seq_s=rt.mtp_seq_pass_s,
        mtp_batched=rt.mtp_batched,
    )


def encoder_work(shape: Shape, gpu: GPUKind, tp: int, eff: Efficiency, items: float,
                 tokens: float, rt: Runtime = ROOFLINE) -> Work:
    """A bidirectional encoder over ``tokens x seq_per_token`` positions (patches before the
    spatial merge); each position attends within its input, at most ``ENCODER_ATTN_SPAN``
    positions (tiles, windows, 30 s audio windows); tensor parallel like an LLM. The hand-off of
    the output embeddings to the LLM (the runtime's seconds per MB) is serial with the forward.
    The runtime's host preprocessing is not here: it overlaps the GPU (:func:`encoder_host_time`)."""
    if items <= 0 or tokens <= 0:
        return Work(0.0, 0.0, 0.0, 0.0)
    seq = tokens * shape.seq_per_token
    span = min(seq / items, ENCODER_ATTN_SPAN)
    flops = (2.0 * shape.matmul_params * seq + shape.attn_flops_per_pair * seq * span) / tp
    comm = 0.0
    if tp > 1:
        n = ALLREDUCES_PER_LAYER * shape.layers
        comm = (_collective_latency(n, tp, eff)
                + n * seq * shape.hidden * ACT_BYTES * _allreduce_s_per_byte(gpu, tp, eff))
    handoff = tokens * shape.output_bytes_per_token * 1e-6 * rt.encoder_s_per_output_mb
    return Work(flops, shape.weight_bytes / tp, layer_time(eff, rt) * shape.layers + handoff, comm)


def encoder_host_time(shape: Shape, rt: Runtime, tokens: float, frames_per_token: float = 1.0) -> float:
    """Host preprocessing of inputs an encoder turns into ``tokens`` LLM tokens (decode, resize,
    normalise, patchify; log-mel features): the runtime's seconds per megapixel of the frames as
    resized (a video token spans ``frames_per_token`` frames) and per second of audio. It runs
    on the CPU beside the GPU (Cornfigurator section 5.2: while the encoder is busy,
    preprocessing of queued inputs overlaps it)."""
    return tokens * (shape.input_pixels_per_token * frames_per_token * 1e-6 * rt.encoder_s_per_mpx
                     + shape.audio_seconds_per_token * rt.encoder_s_per_audio_s)


def dit_work(shape: Shape, gpu: GPUKind, tp: int, eff: Efficiency, batch: int, tokens: float,
             passes: float, rt: Runtime = ROOFLINE) -> Work:
    """One denoising step: ``passes`` forwards (2 with classifier-free guidance) of ``batch``
    sequences of ``tokens`` tokens. Multi-GPU = Ulysses sequence parallelism: FLOPs split,
    weights replicated, four all-to-alls per layer."""
    if batch <= 0 or tokens <= 0:
        return Work(0.0, 0.0, 0.0, 0.0)
    seqs = batch * passes
    flops = seqs * (2.0 * shape.matmul_params * tokens
                    + shape.attn_flops_per_pair * tokens * tokens) / tp
    comm = 0.0
    if tp > 1:
        n = ALLTOALLS_PER_LAYER * shape.layers
        per_gpu = tokens / tp * shape.attn_dim * ACT_BYTES * (tp - 1) / tp
        comm = seqs * (_collective_latency(n, tp, eff) + n * per_gpu / (gpu.link_bw * eff.link))
    return Work(flops, shape.weight_bytes, layer_time(eff, rt) * shape.layers, comm)


def vae_work(shape: Shape, eff: Efficiency, tp: int, batch: int, pixels: float,
             rt: Runtime = ROOFLINE) -> Work:
    """Decode ``batch`` latents of ``pixels`` output pixels; multi-GPU splits the batch."""
    if batch <= 0 or pixels <= 0:
        return Work(0.0, 0.0, 0.0, 0.0)
    per_gpu = math.ceil(batch / tp)
    latents = pixels / shape.pixels_per_token
    flops = per_gpu * 2.0 * shape.params * latents * VAE_WORK_PER_LATENT
    return Work(flops, shape.weight_bytes, layer_time(eff, rt) * shape.layers, 0.0)


def vocoder_calls(shape: Shape, rt: Runtime, audio_seconds: float) -> int:
    """Vocoder calls that voice ``audio_seconds``: one per chunk of the runtime's
    ``vocoder_chunk_frames`` codec frames (a streaming first chunk of one frame is one call)."""
    frames = audio_seconds * shape.frame_rate_hz
    return max(1, math.ceil(frames / rt.vocoder_chunk_frames - 1e-9))


def vocoder_work(shape: Shape, eff: Efficiency, tp: int, batch: int, audio_seconds: float,
                 rt: Runtime = ROOFLINE) -> Work:
    """Voice ``audio_seconds`` for each of ``batch`` streams, in code chunks of the runtime's
    ``vocoder_chunk_frames``: each call pays the runtime's fixed call time and one forward's
    layer overheads and reads the weights; multi-GPU splits the streams."""
    if batch <= 0 or audio_seconds <= 0:
        return Work(0.0, 0.0, 0.0, 0.0)
    per_gpu = math.ceil(batch / tp)
    frames = audio_seconds * shape.frame_rate_hz
    calls = vocoder_calls(shape, rt, audio_seconds)
    flops = per_gpu * 2.0 * shape.params * frames * VOCODER_WORK_PER_FRAME
    return Work(flops, calls * shape.weight_bytes,
                calls * (rt.vocoder_call_s + layer_time(eff, rt) * shape.layers), 0.0)

