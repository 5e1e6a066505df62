"""Drive vLLM's real v1 scheduler on CPU with synthetic model outputs (no model, no weights).

vLLM's ``ModelConfig`` needs a local HF-style ``config.json``: :func:`write_model_dir` writes a
two-layer Llama config. KV cache specs are built by hand, as vLLM's own scheduler tests do.
"""

from __future__ import annotations

import json
import random
from collections import Counter
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
            # vLLM's side queues, shown to the policy but never hidden (omniplane.vllm.mixin)
            "side_waiting": [r.request_id for q in ("kv_holding_waiting", "skipped_waiting")
                             for r in getattr(sched, q, ())],
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
    visible = (set(snap["waiting"]) - hidden) | set(snap["side_waiting"])
    assert admitted <= visible, f"step {step}: vLLM admitted {admitted - visible}, which the policy hid"
    assert admitted.isdisjoint(hidden)


PRIORITY_CLASS = {0: "text", 10: "audio", 20: "image"}
# tight SLOs so that HorizonServe's slack guard and rotation act within a short run
HORIZON_SLO_TABLE = {
    "kind": "omniplane-slo-table",
    "source": "assumption: test SLOs",
    "classes": {
        "text": {"priority": 0, "path": "short", "slo_s": 0.05},
        "audio": {"priority": 10, "path": "long", "slo_s": 1.0},
        "image": {"priority": 20, "path": "long", "slo_s": 5.0},
    },
}


def check_hundreds_of_cycles(sched: Any, n: int = 120, seed: int = 1) -> int:
    """``n`` mixed text/audio/image requests through a wrapped scheduler (policy
    ``HideEveryOther``) to the end: the view checks after every step, then every request
    arrived, finished and got its first token exactly once, the scheduler preempted, the policy
    hid often, classes came from the priorities, one ``step`` per ``decide``. Returns the steps."""
    trace = arrivals(n, seed=seed)
    preempted: set[str] = set()
    hiding: list[bool] = []

    def after(s: Any, step: int, out: Any, snap: dict[str, list[str]]) -> None:
        check_view(s, step, out, snap)
        preempted.update(out.preempted_req_ids or ())
        hiding.append(bool(s.omniplane.last_hidden))

    steps = run(sched, trace, after=after)
    policy = sched.omniplane.bridge.policy
    assert steps >= 200, f"only {steps} cycles"
    assert not sched.has_requests()
    assert len(policy.arrivals) == n and set(policy.arrivals.values()) == {1}
    assert policy.finishes == policy.arrivals, "a request finished twice or never"
    assert sched.omniplane.bridge.by_id == {}
    assert preempted, "the small KV cache was meant to make the scheduler preempt"
    assert sum(hiding) >= 50, "the policy rarely hid anything: the view checks prove little"
    firsts = Counter(r for o in policy.outcomes for r in o.first_tokens)
    assert len(firsts) == n and set(firsts.values()) == {1}, "first tokens must be reported once per request"
    reqs = [r for step in sorted(trace) for r in trace[step]]  # rid = add_request order
    assert [policy.info[i].type for i in range(n)] == [PRIORITY_CLASS[r.priority] for r in reqs]
    assert policy.calls.count("decide") == policy.calls.count("step") == steps
    return steps


def check_fcfs_is_the_bare_scheduler(bare: Any, wrapped: Any, seed: int = 2) -> None:
    """The wrapper with a policy that hides nothing schedules exactly as the bare class."""
    logs: dict[str, list[dict[str, int]]] = {"bare": [], "wrapped": []}
    for name, sched in (("bare", bare), ("wrapped", wrapped)):
        run(
            sched,
            arrivals(60, seed=seed),
            after=lambda s, st, out, snap, n=name: logs[n].append(dict(out.num_scheduled_tokens)),
        )
    assert logs["bare"] == logs["wrapped"]
    assert len(logs["bare"]) > 100


def check_exception_in_schedule_loses_nothing(sched: Any, seed: int = 3, warmup: int = 3) -> None:
    """An exception inside the base ``schedule()`` (KV allocation failing) with requests hidden:
    the queues are as before, and after repair every request finishes once."""
    rng = random.Random(seed)
    for i in range(12):
        sched.add_request(make_request(i, rng))
    for _ in range(warmup):
        out = sched.schedule()
        sched.update_from_output(out, synthetic_output(sched, out, rng))
    real = sched.kv_cache_manager.allocate_slots

    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("allocation failed (test)")

    before_waiting = [r.request_id for r in sched.waiting]
    before_all = set(before_waiting) | {r.request_id for r in sched.running}
    sched.kv_cache_manager.allocate_slots = broken
    try:
        sched.schedule()
    except RuntimeError as exc:
        assert "allocation failed" in str(exc)
    else:
        raise AssertionError("schedule() did not raise")
    assert sched.omniplane.bridge.policy.last_hidden, "nothing was hidden: the test proves nothing"
    assert [r.request_id for r in sched.waiting] == before_waiting
    assert {r.request_id for r in sched.waiting} | {r.request_id for r in sched.running} == before_all
    sched.kv_cache_manager.allocate_slots = real
    run(sched, {})
    policy = sched.omniplane.bridge.policy
    assert not sched.has_requests() and len(policy.finishes) == 12 and set(policy.finishes.values()) == {1}
