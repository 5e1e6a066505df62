"""What a live vLLM engine is configured with, read from the engine itself (never guessed).

Sources, in order of preference, each field recording where it came from:

1. ``GET /server_info?config_format=json``: the engine's whole ``VllmConfig`` (vLLM serves it
   only with ``VLLM_SERVER_DEV_MODE=1``; the fixture server sets it, on loopback only);
2. ``GET /metrics``: ``vllm:cache_config_info`` (block size, KV blocks) and ``GET /v1/models``
   (``max_model_len``), which every vLLM server has;
3. values the caller gives (``--max-num-seqs`` ...), for what neither source tells.

A field no source gives is an error naming the field and how to supply it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from omniplane.perf.steptime import EngineLimits

SERVER_INFO, METRICS, MODELS, GIVEN = "GET /server_info", "GET /metrics", "GET /v1/models", "given"
REQUIRED = ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_gpu_blocks", "max_model_len")


class EngineConfigError(RuntimeError):
    """The endpoint does not say (and the caller did not give) what the simulator needs."""


@dataclass(frozen=True)
class EngineConfig:
    """The engine settings the simulator's LLM engine mirrors, with their sources."""

    url: str
    model: str  # served model name
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    num_gpu_blocks: int
    max_model_len: int
    chunked_prefill: bool = True
    long_prefill_token_threshold: int = 0
    prefix_caching: bool | None = None
    policy: str = "fcfs"
    async_scheduling: bool = False
    scheduler_cls: str | None = None
    dtype: str = ""
    version: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def kv_tokens(self) -> int:
        return self.block_size * self.num_gpu_blocks

    def limits(self) -> EngineLimits:
        return EngineLimits(self.max_num_seqs, self.max_num_batched_tokens, self.kv_tokens)

    def check_supported(self) -> list[str]:
        """What the simulator's engine does not model, as warnings (empty: nothing)."""
        out = []
        if not self.chunked_prefill:
            out.append("chunked prefill is off; the simulator always chunks prefills under the token budget")
        if self.long_prefill_token_threshold:
            out.append(f"long_prefill_token_threshold={self.long_prefill_token_threshold} is not modelled")
        if self.policy != "fcfs":
            out.append(f"scheduling policy {self.policy!r}: the simulator runs FCFS")
        if self.async_scheduling:
            out.append("async scheduling overlaps a step's scheduling with the previous one: not modelled")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url, "model": self.model, "vllm_version": self.version,
            "max_num_seqs": self.max_num_seqs, "max_num_batched_tokens": self.max_num_batched_tokens,
            "block_size": self.block_size, "num_gpu_blocks": self.num_gpu_blocks,
            "kv_cache_tokens": self.kv_tokens, "max_model_len": self.max_model_len,
            "chunked_prefill": self.chunked_prefill,
            "long_prefill_token_threshold": self.long_prefill_token_threshold,
            "prefix_caching": self.prefix_caching, "scheduling_policy": self.policy,
            "async_scheduling": self.async_scheduling, "scheduler_cls": self.scheduler_cls,
            "dtype": self.dtype, "sources": dict(self.sources),
        }


# vLLM's /server_info collects its system report (vllm.collect_env: pip, compilers, GPUs, by
# subprocess) on its first call: 12.5 s measured on this machine at load average ~9 (vLLM 0.30.0),
# over the 10 s the other endpoints get.
SERVER_INFO_TIMEOUT_S = 120.0


def _get(client: httpx.Client, url: str, why: list[str] | None = None,
         timeout_s: float | None = None) -> httpx.Response | None:
    """``url``'s 200 response, else ``None`` with the reason appended to ``why``."""
    try:
        resp = client.get(url, timeout=timeout_s) if timeout_s is not None else client.get(url)
    except httpx.HTTPError as exc:
        if why is not None:
            why.append(f"GET {url}: {type(exc).__name__} {exc}".rstrip())
        return None
    if resp.status_code != 200:
        if why is not None:
            why.append(f"GET {url}: HTTP {resp.status_code}")
        return None
    return resp


def _from_server_info(doc: Any) -> dict[str, Any]:
    cfg = doc.get("vllm_config") if isinstance(doc, dict) else None
    if not isinstance(cfg, dict):
        return {}
    sc, cc, mc = (cfg.get(k) or {} for k in ("scheduler_config", "cache_config", "model_config"))
    out = {
        "max_num_seqs": sc.get("max_num_seqs"),
        "max_num_batched_tokens": sc.get("max_num_batched_tokens"),
        "chunked_prefill": sc.get("enable_chunked_prefill"),
        "long_prefill_token_threshold": sc.get("long_prefill_token_threshold"),
        "policy": sc.get("policy"),
        "async_scheduling": sc.get("async_scheduling"),
        "scheduler_cls": sc.get("scheduler_cls"),
        "block_size": cc.get("block_size"),
        "num_gpu_blocks": cc.get("num_gpu_blocks"),
        "prefix_caching": cc.get("enable_prefix_caching"),
        "max_model_len": mc.get("max_model_len"),
        "dtype": mc.get("dtype"),
    }
    return {k: v for k, v in out.items() if v is not None}


_INFO = re.compile(r'^vllm:cache_config_info\{(?P<labels>[^}]*)\}', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _from_metrics(text: str) -> dict[str, Any]:
    m = _INFO.search(text)
    if m is None:
        return {}
    labels = dict(_LABEL.findall(m.group("labels")))
    out: dict[str, Any] = {}
    for key in ("block_size", "num_gpu_blocks"):
        if labels.get(key, "").isdigit():
            out[key] = int(labels[key])
    if labels.get("enable_prefix_caching") in ("True", "False"):
        out["prefix_caching"] = labels["enable_prefix_caching"] == "True"
    return out


def read_engine_config(url: str, given: Mapping[str, Any] | None = None, *, timeout_s: float = 10.0,
                       transport: httpx.BaseTransport | None = None) -> EngineConfig:
    """The engine's settings (module docstring); raises :class:`EngineConfigError`."""
    url = url.rstrip("/")
    found: dict[str, Any] = {}
    sources: dict[str, str] = {}
    why: list[str] = []

    def take(values: Mapping[str, Any], source: str) -> None:
        for k, v in values.items():
            if k not in found and v is not None:
                found[k], sources[k] = v, source

    with httpx.Client(timeout=timeout_s, transport=transport) as client:
        models = _get(client, f"{url}/v1/models")
        if models is None:
            raise EngineConfigError(
                f"cannot read {url}/v1/models: is an OpenAI-compatible server running there?")
        data = (models.json().get("data") or [{}])[0]
        info = _get(client, f"{url}/server_info?config_format=json", why,
                    max(timeout_s, SERVER_INFO_TIMEOUT_S))
        if info is not None:
            take(_from_server_info(info.json()), SERVER_INFO)
        metrics = _get(client, f"{url}/metrics")
        if metrics is not None:
            take(_from_metrics(metrics.text), METRICS)
        take({"max_model_len": data.get("max_model_len")}, MODELS)
        version = _get(client, f"{url}/version")
    take(given or {}, GIVEN)
    missing = [k for k in REQUIRED if k not in found]
    if missing:
        raise EngineConfigError(
            f"{url}: the engine does not report {', '.join(missing)} (vLLM serves its whole config at "
            "/server_info when started with VLLM_SERVER_DEV_MODE=1); give them as "
            + ", ".join(f"--{k.replace('_', '-')}" for k in missing)
            + ("" if not why else f" ({'; '.join(why)})"))
    return EngineConfig(
        url=url,
        model=str(data.get("id", "")),
        max_num_seqs=int(found["max_num_seqs"]),
        max_num_batched_tokens=int(found["max_num_batched_tokens"]),
        block_size=int(found["block_size"]),
        num_gpu_blocks=int(found["num_gpu_blocks"]),
        max_model_len=int(found["max_model_len"]),
        chunked_prefill=bool(found.get("chunked_prefill", True)),
        long_prefill_token_threshold=int(found.get("long_prefill_token_threshold", 0)),
        prefix_caching=found.get("prefix_caching"),
        policy=str(found.get("policy", "fcfs")),
        async_scheduling=bool(found.get("async_scheduling", False)),
        scheduler_cls=found.get("scheduler_cls"),
        dtype=str(found.get("dtype", "")),
        version=str(version.json().get("version", "")) if version is not None else "",
        sources=sources,
    )
