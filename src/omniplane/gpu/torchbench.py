"""A :class:`~omniplane.gpu.sweep.Bench` on torch: the shared stage and its downstream LLM stage as
random-weight decoders at their true shapes (layers, hidden size, GQA heads, MLP and vocabulary
width of the model's config; Qwen2.5-Omni: the thinker and the talker), timed with CUDA events
on a ladder level's stream.

What is and is not modelled (every timing in the document is of this, not of vLLM-Omni):

- a Qwen2-style decoder layer: RMSNorm, fused QKV projection, grouped-query attention
  (``scaled_dot_product_attention`` over a preallocated KV cache), output projection, SwiGLU
  MLP; embedding and LM head. No rotary embedding (elementwise, small next to the matmuls), no
  sampling, eager mode (the deploy config runs vLLM-Omni with ``enforce_eager``);
- solo first-response latency per request type: the shared stage's prefill of the prompt (the
  encoders' tokens included, their compute not), then for a long path all its output tokens
  decoded (stages hand over whole outputs), the downstream stage's prefill and all its output
  tokens; the vocoder is not run;
- co-running: the downstream stage decoding a batch on its stream while the shared stage's
  decode is timed, and the memory-activity signal (NVML) over that window.

``dry`` runs the same code on the CPU with tiny shapes and reports :class:`FakeBench`'s
synthetic timings (the CPU's would say nothing about SMs); the document is marked synthetic.
torch is imported when a bench is built, never at import time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

from omniplane.gpu.errors import GpuUnavailable
from omniplane.gpu.sweep import FakeBench

DECODE_BATCH = 8  # the fixed-SM sweep's decode batch (as omniplane.sched.calibration's simulated sweep)
DECODE_CONTEXT = 600  # tokens of context per sequence (idem)
PREFILL_TOKENS = 512  # assumption: one prefill chunk of the shared stage
WARMUP, REPEATS = 2, 7
CORUN_STEPS = 24  # downstream decode steps queued per co-running measurement
PRESSURE_WINDOW_S = 0.25  # > 2 GPM intervals (NVML asks for >= 100 ms between samples)
TINY = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "intermediate": 128,
        "vocab": 256}


class Decoder:
    """Random-weight decoder-only transformer at ``shape`` with a KV cache for ``batch`` x ``ctx``."""

    def __init__(self, torch: Any, shape: Mapping[str, Any], *, device: str, dtype: Any, batch: int,
                 ctx: int, seed: int = 0) -> None:
        self.t = torch
        h, heads, kv = int(shape["hidden"]), int(shape["heads"]), int(shape["kv_heads"])
        hd = int(shape.get("head_dim") or h // heads)
        inter, vocab, n = int(shape["intermediate"]), int(shape["vocab"]), int(shape["layers"])
        self.h, self.heads, self.kv, self.hd, self.n = h, heads, kv, hd, n
        gen = torch.Generator(device=device).manual_seed(seed)

        def w(*dims: int) -> Any:
            return (torch.randn(*dims, device=device, dtype=dtype, generator=gen) * 0.02)

        self.embed = w(vocab, h)
        self.layers = [
            {"ln1": torch.ones(h, device=device, dtype=dtype), "qkv": w(h, (heads + 2 * kv) * hd),
             "o": w(heads * hd, h), "ln2": torch.ones(h, device=device, dtype=dtype),
             "gate_up": w(h, 2 * inter), "down": w(inter, h)}
            for _ in range(n)
        ]
        self.norm, self.head = torch.ones(h, device=device, dtype=dtype), w(h, vocab)
        self.cache = torch.zeros(n, 2, batch, kv, ctx, hd, device=device, dtype=dtype)
        self.ctx = ctx

    def _rms(self, x: Any, g: Any) -> Any:
        return x * self.t.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * g

    def forward(self, tokens: Any, start: int) -> Any:
        """Logits of the last position for ``tokens`` [B, T] at positions ``start..start+T-1``."""
        b, n_new = tokens.shape
        end = start + n_new
        if end > self.ctx:
            raise ValueError(f"context {end} exceeds the cache's {self.ctx} tokens")
        x = self.embed[tokens]
        for i, lay in enumerate(self.layers):
            y = self._rms(x, lay["ln1"]) @ lay["qkv"]
            q, k, v = y.split([self.heads * self.hd, self.kv * self.hd, self.kv * self.hd], dim=-1)
            q = q.view(b, n_new, self.heads, self.hd).transpose(1, 2)
            self.cache[i, 0, :b, :, start:end] = k.view(b, n_new, self.kv, self.hd).transpose(1, 2)
            self.cache[i, 1, :b, :, start:end] = v.view(b, n_new, self.kv, self.hd).transpose(1, 2)
            a = self._attend(q, self.cache[i, 0, :b, :, :end], self.cache[i, 1, :b, :, :end],
                             n_new > 1 and start == 0)
            x = x + a.transpose(1, 2).reshape(b, n_new, -1) @ lay["o"]
            g, u = (self._rms(x, lay["ln2"]) @ lay["gate_up"]).chunk(2, dim=-1)
            x = x + (self.t.nn.functional.silu(g) * u) @ lay["down"]
        return self._rms(x[:, -1], self.norm) @ self.head

    def _attend(self, q: Any, k: Any, v: Any, causal: bool) -> Any:
        """Grouped-query attention without copying the KV heads (torch >= 2.5), else with."""
        F = self.t.nn.functional
        try:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        except TypeError:
            rep = self.heads // self.kv
            return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1),
                                                  v.repeat_interleave(rep, dim=1), is_causal=causal)

    def step(self, batch: int, pos: int) -> Any:
        """One decode iteration of ``batch`` sequences at context ``pos``."""
        tokens = self.t.zeros(batch, 1, dtype=self.t.long, device=self.embed.device)
        return self.forward(tokens, pos)

    def prefill(self, n_tokens: int, batch: int = 1) -> Any:
        tokens = self.t.zeros(batch, n_tokens, dtype=self.t.long, device=self.embed.device)
        return self.forward(tokens, 0)


class TorchBench:
    """The bench of module docstring; ``shapes``: ``{"shared": {...}, "downstream": {...}}`` sizes,
    ``work``: per request type ``{output, prompt_tokens, output_tokens, down_tokens}``."""

    def __init__(self, shapes: Mapping[str, Mapping[str, Any]], work: Mapping[str, Mapping[str, Any]], *,
                 device: int = 0, dry: bool = False, total_sms: int = 132, sampler: Any = None,
                 torch_module: Any = None) -> None:
        torch = torch_module if torch_module is not None else _import_torch()
        self.t, self.dry, self.work, self.sampler = torch, dry, dict(work), sampler
        # a dry run exercises the code, not the hardware: one timed repeat, a few tokens per request
        self.warmup, self.repeats, self.corun_steps = (0, 1, 2) if dry else (WARMUP, REPEATS, CORUN_STEPS)
        if dry:
            keys = ("prompt_tokens", "output_tokens", "down_tokens")
            self.work = {t: {**w, **{k: min(int(w[k]), 4) for k in keys}} for t, w in work.items()}
            dev, dtype = "cpu", torch.float32
            self.shapes: dict[str, Any] = {k: {**TINY, "name": v.get("name")} for k, v in shapes.items()}
            self.fake: FakeBench | None = FakeBench(total_sms, {t: w["output"] for t, w in work.items()})
            self.device_name = f"CPU (dry run, tiny shapes; timings synthetic, {total_sms} SMs assumed)"
            self.synthetic = True
            self.source = ("synthetic: scripts/gpu_calibrate.py --dry: tiny random decoders run on the CPU, "
                           f"timings from {self.fake.source}")
        else:
            if not torch.cuda.is_available():
                raise GpuUnavailable("torch.cuda: no CUDA device (CPU build or no GPU)")
            torch.cuda.set_device(device)
            dev, dtype = f"cuda:{device}", torch.bfloat16
            props = torch.cuda.get_device_properties(device)
            self.shapes = {k: dict(v) for k, v in shapes.items()}
            self.fake = None
            self.device_name = (f"{props.name} ({props.multi_processor_count} SMs, "
                                f"cc {props.major}.{props.minor})")
            self.synthetic = False
            self.source = (f"measured: omniplane.gpu.torchbench on {self.device_name}: random-weight "
                           f"{'/'.join(str(s.get('name')) for s in shapes.values())} at their true shapes, "
                           f"bf16, eager, torch {torch.__version__}")
        self.dev = dev
        longest = max(int(w["prompt_tokens"]) + int(w["output_tokens"]) for w in self.work.values())
        longest_down = max([int(w["down_tokens"]) + int(w["prompt_tokens"]) + int(w["output_tokens"])
                            for w in self.work.values()] + [1])
        ctx = max(DECODE_CONTEXT + 8, PREFILL_TOKENS, longest) + 8
        self.shared = Decoder(torch, self.shapes["shared"], device=dev, dtype=dtype, batch=DECODE_BATCH,
                              ctx=ctx if not dry else min(ctx, 2048), seed=1)
        self.down = Decoder(torch, self.shapes["downstream"], device=dev, dtype=dtype, batch=DECODE_BATCH,
                            ctx=max(ctx, longest_down + 8), seed=2)
        self.shapes["decode"] = {"batch": DECODE_BATCH, "context": DECODE_CONTEXT,
                                 "prefill_tokens": PREFILL_TOKENS}

    # ---- timing --------------------------------------------------------------------------------
    def sync(self) -> None:
        if not self.dry:
            self.t.cuda.synchronize()

    def on(self, stream: Any) -> Any:
        return self.t.cuda.stream(stream) if stream is not None and not self.dry else nullcontext()

    def time_ms(self, fn: Any, stream: Any, repeats: int | None = None, warmup: int | None = None) -> float:
        """Median ms of ``fn`` issued on ``stream`` (CUDA events; CPU wall time in a dry run)."""
        warmup = self.warmup if warmup is None else warmup
        repeats = self.repeats if repeats is None or self.dry else repeats
        times = []
        with self.t.inference_mode(), self.on(stream):
            for i in range(warmup + repeats):
                self.sync()
                if self.dry:
                    t0 = time.perf_counter()
                    fn()
                    ms = (time.perf_counter() - t0) * 1e3
                else:
                    cur = self.t.cuda.current_stream()
                    a, b = self.t.cuda.Event(enable_timing=True), self.t.cuda.Event(enable_timing=True)
                    a.record(cur)
                    fn()
                    b.record(cur)
                    b.synchronize()
                    ms = a.elapsed_time(b)
                if i >= warmup:
                    times.append(ms)
        return float(statistics.median(times))

    def decode_ms(self, stream: Any, sms: int) -> float:
        ms = self.time_ms(lambda: self.shared.step(DECODE_BATCH, DECODE_CONTEXT), stream)
        return self.fake.decode_ms(stream, sms) if self.fake else ms

    def prefill_ms(self, stream: Any, sms: int) -> float:
        ms = self.time_ms(lambda: self.shared.prefill(PREFILL_TOKENS), stream, repeats=3)
        return self.fake.prefill_ms(stream, sms) if self.fake else ms

    def corun(self, stream: Any, sms: int, down_stream: Any, down_sms: int) -> tuple[float, float | None]:
        """Shared decode timed while the downstream stage decodes ``CORUN_STEPS`` steps at a time on
        ``down_stream`` (None: a plain stream on the whole GPU); memory activity over the window."""
        t = self.t
        other = down_stream if down_stream is not None or self.dry else t.cuda.Stream()

        def queue_down() -> None:
            with self.on(other):
                for _ in range(self.corun_steps):
                    self.down.step(DECODE_BATCH, DECODE_CONTEXT)

        def shared_under_load() -> None:
            queue_down()
            self.shared.step(DECODE_BATCH, DECODE_CONTEXT)

        if self.fake is not None:  # a dry run: the code runs once, the timing and signal are synthetic
            with t.inference_mode():
                self.time_ms(shared_under_load, stream)
            return self.fake.corun(stream, sms, down_stream, down_sms)
        with t.inference_mode():
            ms = self._corun_ms(queue_down, stream)
            bw = self._pressure(queue_down, stream)
        return ms, bw

    def _corun_ms(self, queue_down: Any, stream: Any) -> float:
        t, times = self.t, []
        for i in range(self.warmup + 5):
            t.cuda.synchronize()
            queue_down()  # the downstream steps are queued (and running) before the timed step
            with self.on(stream):
                cur = t.cuda.current_stream()
                a, b = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
                a.record(cur)
                self.shared.step(DECODE_BATCH, DECODE_CONTEXT)
                b.record(cur)
            b.synchronize()
            if i >= self.warmup:
                times.append(a.elapsed_time(b))
        t.cuda.synchronize()
        return float(statistics.median(times))

    def _pressure(self, queue_down: Any, stream: Any) -> float | None:
        """The sampler's memory activity over a window of co-running (None without a sampler)."""
        if self.sampler is None:
            return None
        self.sync()
        time.sleep(getattr(self.sampler, "interval", 0.1))
        self.sampler.sample(time.monotonic())  # opens the window (GPM: the first sample)
        end = time.monotonic() + PRESSURE_WINDOW_S
        while time.monotonic() < end:
            queue_down()
            with self.on(stream):
                self.shared.step(DECODE_BATCH, DECODE_CONTEXT)
            self.sync()
        value = self.sampler.sample(time.monotonic())
        return None if value is None else float(value)

    # ---- solo latencies --------------------------------------------------------------------------
    def first_response_ms(self, request_type: str) -> float:
        """One request of ``request_type`` alone on the whole GPU (module docstring)."""
        w = self.work[request_type]
        prompt, out, down = int(w["prompt_tokens"]), int(w["output_tokens"]), int(w["down_tokens"])

        def one() -> None:
            self.shared.prefill(prompt)
            if down:
                for i in range(out - 1):
                    self.shared.step(1, prompt + i)
                self.down.prefill(prompt + out)
                for i in range(down - 1):
                    self.down.step(1, prompt + out + i)

        return self.time_ms(one, None, repeats=1, warmup=0)

    def solo_ms(self, request_type: str, n: int) -> list[float]:
        self.first_response_ms(request_type)  # warm-up (a dry run: the code runs, the timing is synthetic)
        if self.fake is not None:
            return self.fake.solo_ms(request_type, n)
        return [self.first_response_ms(request_type) for _ in range(n)]


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise GpuUnavailable("torch is not installed") from None
    return torch
