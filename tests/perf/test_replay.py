"""The closed-loop benchmark client (``vllm bench serve --max-concurrency``) on one executor."""

from __future__ import annotations

import pytest

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.perf.replay import closed_loop
from omniplane.spec import GPUCatalog, ModelSpec


@pytest.fixture(scope="module")
def setup(specs: dict[str, ModelSpec], gpus: GPUCatalog) -> tuple[CostModel, ExecutorConfig]:
    return CostModel(specs["qwen3-omni"], runtime="vllm-v1"), ExecutorConfig(gpus.get("H100-SXM"), 1, 256)


def test_one_request_alone_takes_its_prefill_then_its_decode_steps(
        setup: tuple[CostModel, ExecutorConfig]) -> None:
    cost, cfg = setup
    r = closed_loop(cost, "thinker", cfg, input_len=500, output_len=10, concurrency=1, num_prompts=3)
    assert r.ttft_s == pytest.approx(cost.prefill_time("thinker", cfg, 500))
    steps = sum(cost.decode_step_time("thinker", cfg, 1, 500 + i) for i in range(1, 10))
    assert r.e2el_s == pytest.approx(r.ttft_s + steps)
    assert r.tpot_s == pytest.approx(steps / 9)
    assert r.duration_s == pytest.approx(3 * r.e2el_s)


def test_a_prompt_longer_than_the_token_budget_is_prefilled_in_chunks(
        setup: tuple[CostModel, ExecutorConfig]) -> None:
    cost, cfg = setup
    whole = closed_loop(cost, "thinker", cfg, input_len=3000, output_len=2, concurrency=1, num_prompts=1)
    chunked = closed_loop(cost, "thinker", cfg, input_len=3000, output_len=2, concurrency=1, num_prompts=1,
                          max_batched_tokens=1000)
    assert chunked.iterations == whole.iterations + 2
    chunks = sum(cost.prefill_time("thinker", cfg, 1000, c) for c in (0, 1000, 2000))
    assert chunked.ttft_s == pytest.approx(chunks)


def test_more_concurrency_means_longer_requests_and_more_throughput(
        setup: tuple[CostModel, ExecutorConfig]) -> None:
    cost, cfg = setup
    runs = [closed_loop(cost, "thinker", cfg, input_len=1000, output_len=200, concurrency=c,
                        num_prompts=4 * c) for c in (1, 4, 16)]
    for a, b, c in zip(runs, runs[1:], (1, 4, 16), strict=False):
        assert b.e2el_s > a.e2el_s and b.tpot_s > a.tpot_s
        # four times the concurrency, four times the prompts: more requests per second
        assert 4 * c * 4 / b.duration_s > c * 4 / a.duration_s


@pytest.mark.parametrize("field", ["input_len", "output_len", "concurrency", "num_prompts",
                                   "max_batched_tokens"])
def test_a_bad_size_is_refused_by_name(setup: tuple[CostModel, ExecutorConfig], field: str) -> None:
    cost, cfg = setup
    kwargs = dict(input_len=10, output_len=10, concurrency=1, num_prompts=1, max_batched_tokens=100)
    kwargs[field] = 0
    with pytest.raises(ValueError, match=field):
        closed_loop(cost, "thinker", cfg, **kwargs)
