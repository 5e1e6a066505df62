"""One streamed chat completion against an OpenAI-compatible endpoint, timed chunk by chunk."""

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


async def stream_chat(client: httpx.AsyncClient, url: str, payload: dict[str, Any], worker: int,
                      sample_rate: int = 24000) -> RequestRecord:
    """POST ``payload`` with ``stream: true`` and time every chunk; failures become a record with
    ``error`` set (never an exception)."""
    start = time.monotonic()
    first_token = first_audio = None
    chunks: list[float] = []
    tokens = 0
    usage_out: int | None = None
    usage_in: int | None = None
    audio = 0.0
    try:
        async with client.stream("POST", f"{url}/v1/chat/completions", json=payload) as resp:
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
                if delta.get("content"):
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


async def queue_time_totals(client: httpx.AsyncClient, url: str) -> tuple[float, float] | None:
    """(sum, count) of the server's request queue-time histogram (vLLM's Prometheus metric
    ``vllm:request_queue_time_seconds``), or ``None`` when the server does not report it."""
    try:
        resp = await client.get(f"{url}/metrics", timeout=5.0)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    total = count = 0.0
    found = False
    for line in resp.text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            value = float(line.rsplit(" ", 1)[-1])
        except ValueError:
            continue
        if name == "vllm:request_queue_time_seconds_sum":
            total += value
            found = True
        elif name == "vllm:request_queue_time_seconds_count":
            count += value
    return (total, count) if found else None
