"""The engine's config, read from the engine (dev endpoint, metrics, models) or given."""

from __future__ import annotations

import json

import httpx
import pytest

from omniplane.fidelity.engine import EngineConfigError, read_engine_config

MODELS = {"data": [{"id": "tiny-qwen2", "max_model_len": 4096}]}
INFO = {"vllm_config": {
    "scheduler_config": {"max_num_seqs": 128, "max_num_batched_tokens": 2048, "enable_chunked_prefill": True,
                         "long_prefill_token_threshold": 0, "policy": "fcfs", "async_scheduling": False,
                         "scheduler_cls": None},
    "cache_config": {"block_size": 128, "num_gpu_blocks": 2048, "enable_prefix_caching": True},
    "model_config": {"max_model_len": 4096, "dtype": "torch.float32"}}}
METRICS = ('# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n'
           'vllm:cache_config_info{block_size="16",enable_prefix_caching="False",engine="0",'
           'num_gpu_blocks="1000"} 1.0\n')


def server(info: bool, metrics: bool) -> httpx.MockTransport:
    def handle(req: httpx.Request) -> httpx.Response:
        path = req.url.path
        if path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        if path == "/server_info" and info:
            return httpx.Response(200, content=json.dumps(INFO))
        if path == "/metrics" and metrics:
            return httpx.Response(200, text=METRICS)
        if path == "/version":
            return httpx.Response(200, json={"version": "0.32.0"})
        return httpx.Response(404)

    return httpx.MockTransport(handle)


def test_the_dev_endpoint_gives_every_setting() -> None:
    cfg = read_engine_config("http://e/", transport=server(True, True))
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.kv_tokens) == (128, 2048, 128 * 2048)
    assert cfg.sources["max_num_seqs"] == "GET /server_info"
    assert cfg.sources["block_size"] == "GET /server_info"  # preferred over /metrics
    assert cfg.model == "tiny-qwen2" and cfg.version == "0.32.0" and cfg.check_supported() == []
    assert cfg.limits().token_budget == 2048


def test_metrics_and_given_values_fill_in_without_the_dev_endpoint() -> None:
    cfg = read_engine_config("http://e", {"max_num_seqs": 8, "max_num_batched_tokens": 512},
                             transport=server(False, True))
    assert (cfg.block_size, cfg.num_gpu_blocks, cfg.prefix_caching) == (16, 1000, False)
    assert cfg.sources == {"block_size": "GET /metrics", "num_gpu_blocks": "GET /metrics",
                           "prefix_caching": "GET /metrics", "max_model_len": "GET /v1/models",
                           "max_num_seqs": "given", "max_num_batched_tokens": "given"}


def test_what_no_source_gives_is_named() -> None:
    with pytest.raises(EngineConfigError, match=r"max_num_seqs, max_num_batched_tokens.*--max-num-seqs"):
        read_engine_config("http://e", transport=server(False, True))
    # why the dev endpoint gave nothing is in the message (a 404 here; a timeout on a slow host)
    with pytest.raises(EngineConfigError, match=r"GET http://e/server_info\?config_format=json: HTTP 404"):
        read_engine_config("http://e", transport=server(False, True))
    with pytest.raises(EngineConfigError, match="block_size, num_gpu_blocks"):
        read_engine_config("http://e", {"max_num_seqs": 8, "max_num_batched_tokens": 512},
                           transport=server(False, False))


def test_what_the_simulator_does_not_model_is_warned() -> None:
    doc = json.loads(json.dumps(INFO))
    doc["vllm_config"]["scheduler_config"].update(policy="priority", async_scheduling=True)

    def handle(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/server_info":
            return httpx.Response(200, json=doc)
        return httpx.Response(200, json=MODELS) if req.url.path == "/v1/models" else httpx.Response(404)

    cfg = read_engine_config("http://e", transport=httpx.MockTransport(handle))
    warnings = cfg.check_supported()
    assert any("priority" in w for w in warnings) and any("async" in w for w in warnings)
