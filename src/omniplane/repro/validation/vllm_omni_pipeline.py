"""A closed-loop client on vLLM-Omni's stock two-GPU layout without async chunk.

``concurrency`` clients each send a request, wait for its audio, and send the next, ``num_prompts``
in all (``vllm bench serve --max-concurrency``). A request runs the thinker (GPU 0, continuous
batching as :func:`omniplane.perf.replay.closed_loop`), then, once the thinker has decoded all of
its text (``--no-async-chunk``), the talker (GPU 1, continuous batching over codec frames), then
code2wav on the same GPU 1. Code2wav calls and talker iterations share GPU 1 one at a time: the
requests whose frames are done are voiced together (one batch) before the talker's next iteration.
Every iteration and call is priced by the cost model. Returns mean TTFT (the thinker's first
token) and mean E2EL (the audio's end), in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omniplane.perf.costmodel import CostModel
from omniplane.perf.replay import DEFAULT_MAX_BATCHED_TOKENS
from omniplane.perf.types import ExecutorConfig

MAX_EVENTS = 2_000_000


@dataclass
class _Req:
    start: float
    prefilled: int = 0
    decoded: int = 0
    first: float | None = None
    t_prefilled: int = 0
    t_decoded: int = 0


@dataclass
class _Engine:
    component: str
    prompt: int
    out: int
    max_batch: int
    waiting: list[_Req] = field(default_factory=list)
    running: list[_Req] = field(default_factory=list)
    busy_until: float | None = None
    done_at_end: list[_Req] = field(default_factory=list)


def _iteration(cost: CostModel, cfg: ExecutorConfig, e: _Engine, talker: bool, now: float) -> float:
    """Start one iteration of engine ``e`` at ``now``: its duration; finished requests are kept
    in ``e.done_at_end`` until it ends."""
    while e.waiting and len(e.running) < e.max_batch:
        e.running.append(e.waiting.pop(0))

    def pre(r: _Req) -> int:
        return r.t_prefilled if talker else r.prefilled

    decoding = [r for r in e.running if pre(r) >= e.prompt]
    budget = DEFAULT_MAX_BATCHED_TOKENS - len(decoding)
    chunks: list[tuple[_Req, int]] = []
    for r in e.running:
        if pre(r) < e.prompt and budget > 0:
            n = min(e.prompt - pre(r), budget)
            chunks.append((r, n))
            budget -= n
    pt = sum(n for _, n in chunks)
    pc = sum(pre(r) for r, _ in chunks)
    dc = sum(e.prompt + (r.t_decoded if talker else r.decoded) for r in decoding)
    dt = cost.llm_iteration_time(e.component, cfg, prefill_tokens=pt, prefill_context=pc,
                                 prefill_requests=max(1, len(chunks)), decode_batch=len(decoding),
                                 decode_context=dc)
    end = now + dt
    for r in decoding:
        if talker:
            r.t_decoded += 1
        else:
            r.decoded += 1
    for r, n in chunks:
        if talker:
            r.t_prefilled += n
            if r.t_prefilled >= e.prompt:
                r.t_decoded = 1
        else:
            r.prefilled += n
            if r.prefilled >= e.prompt:
                r.first, r.decoded = end, 1
    finished = [r for r in e.running if (r.t_decoded if talker else r.decoded) >= e.out]
    for r in finished:
        e.running.remove(r)
    e.done_at_end = finished
    e.busy_until = end
    return end


@dataclass(frozen=True)
class PipelineResult:
    ttft_s: float
    e2el_s: float


def no_async_chunk_loop(cost: CostModel, cfg: ExecutorConfig, *, input_len: int, output_len: int,
                        frames: int, audio_s: float, concurrency: int, num_prompts: int,
                        max_batch: int = 256, talker_max_batch: int = 64) -> PipelineResult:
    """Replay one ``--no-async-chunk`` benchmark configuration (module doc)."""
    for name, v in (("input_len", input_len), ("output_len", output_len), ("frames", frames),
                    ("concurrency", concurrency), ("num_prompts", num_prompts)):
        if v < 1:
            raise ValueError(f"no_async_chunk_loop: {name} must be >= 1, got {v}")
    thinker = _Engine("thinker", input_len, output_len, max_batch)
    talker = _Engine("talker", input_len, frames, talker_max_batch)
    voice_queue: list[_Req] = []
    voicing: list[_Req] = []
    gpu1_busy: float | None = None  # end of code2wav's current call
    sent, ends = 0, []
    now = 0.0
    done: list[tuple[_Req, float]] = []

    def send(t: float) -> None:
        nonlocal sent
        while sent < num_prompts and sent - len(done) < concurrency:
            thinker.waiting.append(_Req(t))
            sent += 1

    send(0.0)
    for _ in range(MAX_EVENTS):
        if thinker.busy_until is None and (thinker.waiting or thinker.running):
            _iteration(cost, cfg, thinker, False, now)
        if talker.busy_until is None and gpu1_busy is None:
            if voice_queue:
                voicing, voice_queue = voice_queue, []
                gpu1_busy = now + cost.vocoder_time("code2wav", cfg, len(voicing), audio_s)
            elif talker.waiting or talker.running:
                _iteration(cost, cfg, talker, True, now)
        times = [t for t in (thinker.busy_until, talker.busy_until, gpu1_busy) if t is not None]
        if not times:
            break
        now = min(times)
        if thinker.busy_until == now:
            thinker.busy_until = None
            talker.waiting.extend(thinker.done_at_end)
            thinker.done_at_end = []
        if talker.busy_until == now:
            talker.busy_until = None
            voice_queue.extend(talker.done_at_end)
            talker.done_at_end = []
        if gpu1_busy == now:
            gpu1_busy = None
            for r in voicing:
                done.append((r, now))
                ends.append(now)
            voicing = []
            send(now)
    else:
        raise RuntimeError(f"no_async_chunk_loop: no end after {MAX_EVENTS} events")
    n = len(done)
    return PipelineResult(sum((r.first or r.start) - r.start for r, _ in done) / n,
                          sum(t - r.start for r, t in done) / n)
