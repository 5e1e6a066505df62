"""One streamed request against an OpenAI-compatible endpoint, timed chunk by chunk:
``/v1/chat/completions`` (``api="chat"``: a chunk carries output when its delta has text or
audio) or ``/v1/completions`` (``api="completions"``, e.g. token-id prompts to a server without a
tokenizer: every chunk with a choice carries one output token, whatever its text)."""

from __future__ import annotations

import base64
import binascii
import json
import struct
import time
from typing import Any

import httpx

from omniplane.perf.profiler.metrics import RequestRecord


def audio_seconds(data: str, sample_rate: int) -> float:
    """Duration of one base64 audio chunk: a WAV container is read from its header, anything
    else is taken as 16-bit mono PCM at ``sample_rate``."""
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return 0.0
    if raw[:4] == b"RIFF" and raw[8:12] == b"WAVE" and len(raw) >= 44:
        channels, rate = struct.unpack("<HI", raw[22:28])
        bits = struct.unpack("<H", raw[34:36])[0]
        frame = max(1, channels * bits // 8)
        return float(max(0, len(raw) - 44) / frame / max(int(rate), 1))
    return len(raw) / 2 / sample_rate


def _delta(chunk: dict[str, Any]) -> dict[str, Any]:
    choices = chunk.get("choices") or []
    if choices and isinstance(choices[0], dict):
        d = choices[0].get("delta") or {}
        return d if isinstance(d, dict) else {}
    return {}


PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
# vLLM's per-request histograms on /metrics (seconds): name -> key in PointMetrics.server_s
SERVER_HISTOGRAMS = {
    "vllm:request_queue_time_seconds": "queue",
    "vllm:request_prefill_time_seconds": "prefill",
    "vllm:request_decode_time_seconds": "decode",
    "vllm:time_to_first_token_seconds": "ttft",
    "vllm:inter_token_latency_seconds": "itl",
    "vllm:e2e_request_latency_seconds": "e2el",
}


async def stream_chat(client: httpx.AsyncClient, url: str, payload: dict[str, Any], worker: int,
                      sample_rate: int = 24000, api: str = "chat") -> RequestRecord:
    """POST ``payload`` with ``stream: true`` to the ``api``'s path and time every chunk;
    failures become a record with ``error`` set (never an exception)."""
    start = time.monotonic()
    first_token = first_audio = None
    chunks: list[float] = []
    tokens = 0
    usage_out: int | None = None
    usage_in: int | None = None
    audio = 0.0
    try:
        async with client.stream("POST", f"{url}{PATHS[api]}", json=payload) as resp:
            if resp.status_code != 200:
                body = (await resp.aread()).decode(errors="replace")[:200]
                return RequestRecord(worker, start, time.monotonic(),
                                     error=f"HTTP {resp.status_code}: {body}")
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    continue  # read to the end of the body so the connection can be reused
                now = time.monotonic()
                try:
                    chunk = json.loads(data)
                except json.JSONDecodeError:
                    return RequestRecord(worker, start, now, error=f"malformed stream chunk: {data[:80]!r}")
                if "error" in chunk:
                    return RequestRecord(worker, start, now, error=f"server error: {chunk['error']}")
                usage = chunk.get("usage") or {}
                if usage:
                    usage_out = usage.get("completion_tokens", usage_out)
                    usage_in = usage.get("prompt_tokens", usage_in)
                delta = _delta(chunk)
                got = False
                if (api == "completions" and chunk.get("choices")) or delta.get("content"):
                    first_token = first_token if first_token is not None else now
                    tokens += 1
                    got = True
                aud = delta.get("audio")
                if isinstance(aud, dict) and aud.get("data"):
                    first_audio = first_audio if first_audio is not None else now
                    audio += audio_seconds(str(aud["data"]), sample_rate)
                    got = True
                if got:
                    chunks.append(now)
    except httpx.HTTPError as exc:
        return RequestRecord(worker, start, time.monotonic(), error=f"{type(exc).__name__}: {exc}")
    end = time.monotonic()
    if first_token is None and first_audio is None:
        return RequestRecord(worker, start, end, error="the stream ended without any output")
    return RequestRecord(worker, start, end, first_token, first_audio, tuple(chunks),
                         int(usage_out) if usage_out is not None else tokens,
                         int(usage_in) if usage_in is not None else None, audio)


async def server_totals(client: httpx.AsyncClient, url: str) -> dict[str, tuple[float, float]] | None:
    """``{key: (sum, count)}`` of the server's per-request histograms (vLLM's Prometheus metrics
    in :data:`SERVER_HISTOGRAMS`, summed over label sets), or ``None`` when the server has no
    ``/metrics``. Keys the server does not report are absent."""
    try:
        resp = await client.get(f"{url}/metrics", timeout=5.0)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for line in resp.text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        base, _, part = name.rpartition("_")
        key = SERVER_HISTOGRAMS.get(base)
        if key is None or part not in ("sum", "count"):
            continue
        try:
            value = float(line.rsplit(" ", 1)[-1])
        except ValueError:
            continue
        target = sums if part == "sum" else counts
        target[key] = target.get(key, 0.0) + value
    return {k: (sums[k], counts.get(k, 0.0)) for k in sums} or None


async def server_totals_at(url: str) -> dict[str, tuple[float, float]] | None:
    """:func:`server_totals` of ``url`` over a client of its own (a read between two runs)."""
    async with httpx.AsyncClient(timeout=10.0) as client:
        return await server_totals(client, url)


def server_means(before: dict[str, tuple[float, float]] | None,
                 after: dict[str, tuple[float, float]] | None) -> dict[str, float]:
    """Mean of each histogram over the requests finished between two readings."""
    if before is None or after is None:
        return {}
    out = {}
    for key, (s1, c1) in after.items():
        s0, c0 = before.get(key, (0.0, 0.0))
        if c1 > c0:
            out[key] = (s1 - s0) / (c1 - c0)
    return out
