"""Solo latency: each request type's first-response latency alone on an idle deployment.

SLO tables (solo p95 x multiplier) are built from it, and the simulator must agree with it at
zero load, so the semantics are exact:

* First response: TTFT for text output (arrival until the producing LLM's prefill iteration
  completes, which emits the first token); TTFO for speech (until the vocoder emits its first
  audio chunk); E2E for images (until the VAE finishes).
* Encoders run before the LLM they feed: CPU preprocessing (``items x
  model.cpu_seconds_per_item(encoder)``; the executor is idle, so nothing else overlaps it) and
  then the GPU pass of all items as one batch. Several encoders of one request on the same
  executor preprocess one after another on the CPU in path order, and their GPU passes run one
  after another, each as soon as its input is ready and the GPU is free (preprocessing of the
  next input overlaps the previous GPU pass).
* An LLM prefills its prompt in chunks of at most ``chunk_tokens`` (each chunk attends to the
  chunks before it) and emits its first token when the last chunk completes; each further token
  is one batch-1 decode step over the growing context (``decode_step_time``). An LLM without
  output tokens (a text encoder) only prefills.
* A DiT runs ``steps`` denoising steps of batch 1; the VAE decodes once.
* Along an edge marked ``streaming`` the downstream starts at the upstream's first output:
  LLM -> LLM, the downstream prefills the context available then (its prompt minus the
  upstream's not yet generated tokens) and emits its first token; LLM -> vocoder, the vocoder
  voices its first chunk of one codec frame (``1 / frame_rate_hz`` seconds) as soon as the
  first frame exists. Along a non-streaming edge the downstream waits until the upstream has
  finished, and a non-streaming vocoder's first chunk is the whole utterance.
* Components on different executors (``placement``) add ``transfer_s`` on the edge between them
  (plans carry ``transfer_ms``, default 10 ms); the default solo deployment is one executor, so
  there is none. A streaming upstream's later decode steps are assumed not to delay the
  downstream's first step.

Request sizes are sampled with :func:`omniplane.spec.work.sample_work` (seeded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from omniplane.perf.costmodel import CostModel
from omniplane.perf.types import ExecutorConfig, InfeasibleConfig
from omniplane.spec import ComponentKind, GeneratorKind, GPUKind, ModelSpec
from omniplane.spec.work import ResolvedWork, sample_work

CHUNK_TOKENS = 8192  # assumption: vLLM's max_num_batched_tokens for online serving on large GPUs
DEFAULT_TRANSFER_S = 0.010  # plans' default transfer_ms


@dataclass(frozen=True)
class SoloLatency:
    """First-response latency of one request type alone, in seconds."""

    type: str
    metric: str
    n: int
    p50: float
    p95: float
    mean: float
    samples: tuple[float, ...] = ()


@dataclass(frozen=True)
class _Times:
    first_out: float  # when the component's first output exists
    done: float  # when it has produced everything


def default_solo_config(model: ModelSpec, cost: CostModel, gpu: GPUKind,
                        tp: int | None = None) -> ExecutorConfig:
    """Every component on one executor of ``gpu``: TP 1, or the smallest TP whose weights fit
    (``tp`` forces a degree; it must fit)."""
    names = [c.name for c in model.components]
    degrees = [tp] if tp else [1, 2, 4, 8]
    last: InfeasibleConfig | None = None
    for degree in degrees:
        cfg = ExecutorConfig(gpu, degree, 1)
        try:
            cost.check_fits(names, cfg)
            return cfg
        except InfeasibleConfig as exc:
            last = exc
    assert last is not None
    tried = ", ".join(str(d) for d in degrees)
    raise InfeasibleConfig(last.components, last.gpu, last.tp, last.needed, last.available,
                           f"no TP degree in [{tried}] fits; largest tried shown")


def request_latency(model: ModelSpec, cost: CostModel, cfgs: Mapping[str, ExecutorConfig],
                    type_name: str, work: ResolvedWork, placement: Mapping[str, str] | None = None,
                    transfer_s: float = DEFAULT_TRANSFER_S, chunk_tokens: int = CHUNK_TOKENS) -> float:
    """First-response latency of one request with resolved ``work`` (module docstring)."""
    rt = model.request_type(type_name)
    path = model.ordered(rt.path)
    place = placement or {}
    times: dict[str, _Times] = {}
    cpu_free: dict[str, float] = {}  # executor -> when its CPU preprocessing is free
    gpu_free: dict[str, float] = {}  # executor -> when its last encoder pass ends
    for name in path:
        comp = model.component(name)
        cfg = cfgs[name]
        w = work[name]
        start = 0.0
        streaming_from: str | None = None
        for pred, streaming in model.feeders(path[: path.index(name)], name):
            t = times[pred].first_out if streaming else times[pred].done
            if place.get(pred, "") != place.get(name, ""):
                t += transfer_s
            if streaming and t >= start:
                streaming_from = pred
            start = max(start, t)
        if comp.kind is ComponentKind.ENCODER:
            executor = place.get(name, "")
            ready = max(start, cpu_free.get(executor, 0.0)) + w["items"] * model.cpu_seconds_per_item(name)
            cpu_free[executor] = ready
            end = (max(ready, gpu_free.get(executor, 0.0))
                   + cost.encoder_time(name, cfg, int(w["items"]), w["tokens"]))
            gpu_free[executor] = end
            times[name] = _Times(end, end)
        elif comp.kind is ComponentKind.LLM:
            prompt = int(w["prompt_tokens"])
            if streaming_from is not None and model.component(streaming_from).is_llm:
                prompt -= int(work[streaming_from]["output_tokens"]) - 1  # only the first token exists
            first = start + chunked_prefill_time(cost, name, cfg, max(prompt, 1), chunk_tokens)
            done = first + _decode(cost, name, cfg, max(prompt, 1), int(w["output_tokens"]) - 1)
            times[name] = _Times(first, done)
        elif comp.generator is GeneratorKind.DIT:
            end = start + w["steps"] * cost.dit_step_time(name, cfg, 1, w["tokens"])
            times[name] = _Times(end, end)
        elif comp.generator is GeneratorKind.VAE:
            end = start + cost.vae_time(name, cfg, 1, w["pixels"])
            times[name] = _Times(end, end)
        else:  # vocoder
            frame = 1.0 / (comp.size.frame_rate_hz or 12.5)
            chunk = frame if streaming_from is not None else w["audio_seconds"]
            first = start + cost.vocoder_time(name, cfg, 1, chunk)
            times[name] = _Times(first, start + cost.vocoder_time(name, cfg, 1, w["audio_seconds"]))
    sink = path[-1]
    return times[sink].done if rt.first_response.value == "e2e" else times[sink].first_out


def chunked_prefill_time(cost: CostModel, name: str, cfg: ExecutorConfig, tokens: int, chunk: int) -> float:
    """Prefill of ``tokens`` in chunks of at most ``chunk``, each attending to the ones before."""
    total, done = 0.0, 0
    while done < tokens:
        n = min(chunk, tokens - done)
        total += cost.prefill_time(name, cfg, n, done)
        done += n
    return total


def _decode(cost: CostModel, name: str, cfg: ExecutorConfig, context: int, steps: int) -> float:
    return sum(cost.decode_step_time(name, cfg, 1, context + k) for k in range(1, steps + 1))


def solo_latencies(model: ModelSpec, cost: CostModel, cfgs: ExecutorConfig | Mapping[str, ExecutorConfig],
                   type_name: str, n: int = 200, seed: int = 0,
                   placement: Mapping[str, str] | None = None,
                   transfer_s: float = DEFAULT_TRANSFER_S) -> SoloLatency:
    """p50/p95 first-response latency of ``type_name`` over ``n`` sampled requests."""
    per = cfgs if isinstance(cfgs, Mapping) else {c.name: cfgs for c in model.components}
    rng = np.random.default_rng(seed)
    xs = [request_latency(model, cost, per, type_name, w, placement, transfer_s)
          for w in sample_work(model, type_name, rng, n)]
    arr = np.asarray(xs)
    metric = model.request_type(type_name).first_response.value
    return SoloLatency(type_name, metric, n, float(np.percentile(arr, 50)), float(np.percentile(arr, 95)),
                       float(arr.mean()), tuple(float(x) for x in xs))


def solo_table(model: ModelSpec, cost: CostModel, cfgs: ExecutorConfig | Mapping[str, ExecutorConfig],
               n: int = 200, seed: int = 0) -> list[SoloLatency]:
    """Every request type of the model (each with the same seed, so tables are reproducible)."""
    return [solo_latencies(model, cost, cfgs, t, n, seed) for t in model.type_names]


SOLO_SAMPLES = 200  # assumption: requests per type behind a solo percentile (seeded, reproducible)


def solo_percentiles(model: ModelSpec, cost: CostModel, gpu: GPUKind, percentile: float, *,
                     n: int = SOLO_SAMPLES, seed: int = 0) -> tuple[dict[str, float], ExecutorConfig]:
    """Every type's ``percentile`` solo first-response latency (seconds) on the default solo
    deployment (:func:`default_solo_config`), and that deployment: the statistic behind
    HorizonServe's SLO (multiplier x solo p95), for the SLO resolver and the offline calibration."""
    cfg = default_solo_config(model, cost, gpu)
    return ({t: float(np.percentile(solo_latencies(model, cost, cfg, t, n, seed).samples, percentile))
             for t in model.type_names}, cfg)
