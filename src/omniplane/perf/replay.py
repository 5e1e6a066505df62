"""A closed-loop benchmark client on one LLM executor: ``vllm bench serve --max-concurrency``.

``concurrency`` requests are in flight at a time; when one finishes the next of ``num_prompts``
starts at once. Every request has ``input_len`` prompt tokens and decodes exactly ``output_len``
tokens (``--ignore-eos``). The engine runs vLLM v1's continuous batching: each iteration decodes
one token for every running sequence and fills the rest of its token budget
(``max_batched_tokens``) with chunks of waiting prompts, oldest first. Each iteration is priced
by the cost model (:meth:`omniplane.perf.costmodel.CostModel.llm_iteration_time`).

The output is the benchmark's own metrics: mean TTFT (arrival to first token), mean TPOT
((E2EL - TTFT) / (output_len - 1)) and mean E2EL, in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from omniplane.perf.costmodel import CostModel
from omniplane.perf.types import ExecutorConfig

# assumption: vLLM v1's default token budget per iteration for an online server on a GPU with
# at least 70 GiB (vllm/engine/arg_utils.py, default_max_num_batched_tokens: 8192 for
# OPENAI_API_SERVER); the CI files do not override it
DEFAULT_MAX_BATCHED_TOKENS = 8192
MAX_ITERATIONS = 2_000_000  # a bound on the loop (a run of 128 x 900 tokens takes ~30k)


@dataclass(frozen=True)
class BenchResult:
    """Mean metrics of one closed-loop run (seconds)."""

    ttft_s: float
    tpot_s: float
    e2el_s: float
    duration_s: float
    iterations: int

    def to_json(self) -> dict[str, float]:
        return {"mean_ttft_ms": round(1e3 * self.ttft_s, 2), "mean_tpot_ms": round(1e3 * self.tpot_s, 3),
                "mean_e2el_ms": round(1e3 * self.e2el_s, 1), "duration_s": round(self.duration_s, 2)}


@dataclass
class _Req:
    start: float
    prefilled: int = 0
    decoded: int = 0
    first: float | None = None


def closed_loop(cost: CostModel, component: str, cfg: ExecutorConfig, *, input_len: int,
                output_len: int, concurrency: int, num_prompts: int,
                max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS) -> BenchResult:
    """Replay a fixed-concurrency benchmark of ``num_prompts`` requests (see the module doc)."""
    for name, v in (("input_len", input_len), ("output_len", output_len), ("concurrency", concurrency),
                    ("num_prompts", num_prompts), ("max_batched_tokens", max_batched_tokens)):
        if v < 1:
            raise ValueError(f"closed_loop: {name} must be >= 1, got {v}")
    price = cost.llm_iteration_fn(component, cfg)
    now = 0.0
    started = 0
    running: list[_Req] = []
    done: list[_Req] = []
    ends: list[float] = []
    for it in range(MAX_ITERATIONS):
        while started < num_prompts and len(running) < concurrency:
            running.append(_Req(now))
            started += 1
        if not running:
            return _result(done, ends, output_len, now, it)
        decoding = [r for r in running if r.prefilled >= input_len]
        budget = max_batched_tokens - len(decoding)
        chunks: list[tuple[_Req, int]] = []
        for r in running:
            if r.prefilled < input_len and budget > 0:
                n = min(input_len - r.prefilled, budget)
                chunks.append((r, n))
                budget -= n
        pt = sum(n for _, n in chunks)
        pc = sum(r.prefilled for r, _ in chunks)
        dc = sum(input_len + r.decoded for r in decoding)
        now += price(pt, pc, max(1, len(chunks)), len(decoding), dc)
        for r in decoding:
            r.decoded += 1
        for r, n in chunks:
            r.prefilled += n
            if r.prefilled >= input_len:  # the iteration that ends a prompt emits its first token
                r.first = now
                r.decoded = 1
        finished = [r for r in running if r.decoded >= output_len]
        for r in finished:
            running.remove(r)
            done.append(r)
            ends.append(now)
    raise RuntimeError(f"closed_loop: no end after {MAX_ITERATIONS} iterations")


def _result(done: list[_Req], ends: list[float], output_len: int, now: float, iterations: int) -> BenchResult:
    n = len(done)
    ttft = sum((r.first or r.start) - r.start for r in done) / n
    e2el = sum(e - r.start for r, e in zip(done, ends, strict=True)) / n
    tpot = (e2el - ttft) / (output_len - 1) if output_len > 1 else 0.0
    return BenchResult(ttft, tpot, e2el, now, iterations)
