"""Drive vLLM's real v1 scheduler on CPU with synthetic model outputs (no model, no weights).

vLLM's ``ModelConfig`` needs a local HF-style ``config.json``: :func:`write_model_dir` writes a
two-layer Llama config. KV cache specs are built by hand, as vLLM's own scheduler tests do.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

BLOCK = 16
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "torch_dtype": "float32",
    "rms_norm_eps": 1e-5,
}


def write_model_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(TINY_LLAMA))
    return path


def make_config(
    model_dir: Path, *, policy: str = "fcfs", max_num_seqs: int = 8, max_num_batched_tokens: int = 256
) -> VllmConfig:
    mc = ModelConfig(model=str(model_dir), skip_tokenizer_init=True, max_model_len=4096, dtype="float32")
    sc = SchedulerConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=4096,
        is_encoder_decoder=False,
        policy=policy,
    )
    cc = CacheConfig(block_size=BLOCK, enable_prefix_caching=False)
    return VllmConfig(model_config=mc, scheduler_config=sc, cache_config=cc)


def make_scheduler(
    cls: type[Scheduler], config: VllmConfig, additional: dict[str, Any] | None, blocks: int = 96
) -> Any:
    config.additional_config = {"omniplane": additional} if additional is not None else {}
    config.cache_config.num_gpu_blocks = blocks
    spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=4, head_size=16, dtype=torch.float32)
    kv = KVCacheConfig(
        num_blocks=blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)]
    )
    return cls(config, kv, StructuredOutputManager(config), block_size=BLOCK)


def make_request(i: int, rng: random.Random, priority: int | None = None) -> Request:
    prompt = [rng.randint(1, 1000) for _ in range(rng.randint(4, 300))]
    sp = SamplingParams(max_tokens=rng.randint(1, 40), ignore_eos=True)
    return Request(
        f"req-{i}", prompt, sp, None, priority=rng.choice([0, 10, 20]) if priority is None else priority
    )


def synthetic_output(sched: Any, out: Any, rng: random.Random) -> ModelRunnerOutput:
    """One sampled token for every request whose prompt (and previous outputs) are all
    computed after this step; none for a partial prefill chunk."""
    ids = list(out.num_scheduled_tokens)
    toks = []
    for rid in ids:
        r = sched.requests[rid]
        toks.append([rng.randint(1, 1000)] if r.num_computed_tokens >= r.num_tokens else [])
    return ModelRunnerOutput(
        req_ids=ids, req_id_to_index={x: i for i, x in enumerate(ids)}, sampled_token_ids=toks
    )


def run(
    sched: Any,
    arrivals: dict[int, list[Request]],
    *,
    seed: int = 0,
    max_steps: int = 5000,
    before: Callable[[Any, int], None] | None = None,
    after: Callable[[Any, int, Any, dict[str, Any]], None] | None = None,
) -> int:
    """Add ``arrivals[step]`` before each step and step until no request is left; returns the
    number of steps. ``after(sched, step, output, snapshot)`` sees the queues as they were
    before the step (``snapshot``: waiting / running request ids in order)."""
    rng = random.Random(seed)
    step = 0
    last = max(arrivals) if arrivals else 0
    while step < max_steps and (step <= last or sched.has_requests()):
        for r in arrivals.get(step, []):
            sched.add_request(r)
        if before is not None:
            before(sched, step)
        snap = {
            "waiting": [r.request_id for r in sched.waiting],
            "running": [r.request_id for r in sched.running],
            "kv_waiting": [r.request_id for r in getattr(sched, "kv_holding_waiting", ())],
        }
        out = sched.schedule()
        if after is not None:
            after(sched, step, out, snap)
        sched.update_from_output(out, synthetic_output(sched, out, rng))
        step += 1
    return step


def arrivals(n: int, seed: int, per_step: int = 3) -> dict[int, list[Any]]:
    rng = random.Random(seed)
    reqs = [make_request(i, rng) for i in range(n)]
    return {s: reqs[s * per_step : (s + 1) * per_step] for s in range(-(-n // per_step))}


def check_view(sched: Any, step: int, out: Any, snap: dict[str, list[str]]) -> None:
    """After schedule(): hidden requests are waiting again; admitted ones were visible."""
    op = sched.omniplane
    policy = op.bridge.policy
    hidden = {op.bridge.by_rid[r].request.request_id for r in policy.last_hidden if r in op.bridge.by_rid}
    assert hidden == op.last_hidden
    waiting_now = [r.request_id for r in sched.waiting]
    assert hidden <= set(waiting_now), f"step {step}: hidden requests missing from the queue"
    # the survivors of the starting queue keep their order
    survivors = [i for i in snap["waiting"] if i in set(waiting_now)]
    assert [i for i in waiting_now if i in set(snap["waiting"])] == survivors
    admitted = set(out.num_scheduled_tokens) - set(snap["running"])
    visible = (set(snap["waiting"]) - hidden) | set(snap["kv_waiting"])
    assert admitted <= visible, f"step {step}: vLLM admitted {admitted - visible}, which the policy hid"
    assert admitted.isdisjoint(hidden)
