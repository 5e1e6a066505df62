"""The ingress's HTTP API: request bodies in, OpenAI-style chunks out (no Ray, no web framework).

Two endpoints take a request:

* ``POST /v1/chat/completions``: OpenAI chat completions. The request type comes from the
  content parts (``text``, ``image_url``, ``video_url``, ``input_audio``/``audio_url``) and the
  requested output ``modalities`` (``["text"]``, ``["text", "audio"]``, ``["image"]``); sizes are
  sampled from the type's distributions, with items counted from the parts, the prompt from the
  text (4 characters per token) and the output capped by ``max_tokens``. The extension field
  ``omniplane: {"id", "type", "work"}`` gives an id (idempotency) and exact work.
* ``POST /v1/omniplane/requests``: ``{"type", "id"?, "work"?, "stream"?}`` with ``work`` in the
  canonical quantities of ``omniplane.spec.work`` (the load generator's replay format).

Both answer with ``chat.completion`` objects, or with ``chat.completion.chunk`` server-sent
events when ``stream`` is true: a text chunk when the first token exists, an audio chunk when
the first audio exists, a final chunk with ``finish_reason`` and ``usage``. Each chunk carries
``omniplane: {"event", "t_ms"}`` (model milliseconds since arrival). Malformed bodies raise
:class:`BadRequest` naming the field (HTTP 400, OpenAI error format with ``param``).
"""

from __future__ import annotations

import base64
import json
import math
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from omniplane.spec import ComponentKind, GeneratorKind, Modality, ModelSpec
from omniplane.spec.work import ResolvedWork, resolve, sample_raw

CHARS_PER_TOKEN = 4  # assumption: ~4 characters of English text per BPE token (OpenAI rule of thumb)
PART_MODALITY = {
    "text": Modality.TEXT,
    "image_url": Modality.IMAGE,
    "video_url": Modality.VIDEO,
    "input_audio": Modality.AUDIO,
    "audio_url": Modality.AUDIO,
}
OUTPUTS = {"text": Modality.TEXT, "audio": Modality.AUDIO, "image": Modality.IMAGE}


class BadRequest(ValueError):
    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param
        self.message = message

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": str(self),
                "type": "invalid_request_error",
                "param": self.param,
                "code": None,
            }
        }


@dataclass(frozen=True)
class ParsedRequest:
    client_id: str | None
    type: str
    work: ResolvedWork
    stream: bool
    include_usage: bool = True


def canonical_keys(model: ModelSpec, comp: str) -> tuple[str, ...]:
    c = model.component(comp)
    if c.kind is ComponentKind.ENCODER:
        return ("items", "tokens")
    if c.kind is ComponentKind.LLM:
        return ("prompt_tokens", "output_tokens")
    return {
        GeneratorKind.VOCODER: ("audio_seconds",),
        GeneratorKind.DIT: ("steps", "pixels", "tokens"),
        GeneratorKind.VAE: ("pixels",),
    }[c.generator]  # type: ignore[index]


def _seed(text: str) -> int:
    return zlib.crc32(text.encode())


def _client_id(value: Any, param: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and not value):
        raise BadRequest(param, "expected a non-empty string or an integer")
    return str(value)


def _bool(body: dict[str, Any], key: str, default: bool) -> bool:
    v = body.get(key, default)
    if not isinstance(v, bool):
        raise BadRequest(key, f"expected true or false, got {json.dumps(v)}")
    return v


def _check_type(model: ModelSpec, value: Any, param: str) -> str:
    if not isinstance(value, str) or value not in model.type_names:
        raise BadRequest(param, f"expected one of {', '.join(model.type_names)}, got {json.dumps(value)}")
    return value


def parse_work(model: ModelSpec, type_name: str, work: Any, param: str = "work") -> ResolvedWork:
    """Validate canonical work for every component on the type's path."""
    if not isinstance(work, dict):
        raise BadRequest(param, "expected an object mapping component -> quantity -> number")
    out: ResolvedWork = {}
    for comp in model.ordered(model.path_of(type_name)):
        given = work.get(comp)
        if not isinstance(given, dict):
            raise BadRequest(
                f"{param}.{comp}",
                f"missing (the path of {type_name} needs {', '.join(canonical_keys(model, comp))})",
            )
        out[comp] = {}
        for q in canonical_keys(model, comp):
            v = given.get(q)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise BadRequest(f"{param}.{comp}.{q}", f"expected a finite number >= 0, got {json.dumps(v)}")
            out[comp][q] = float(v)
        out[comp].update(
            {
                q: float(v)
                for q, v in given.items()
                if q not in out[comp] and isinstance(v, (int, float)) and not isinstance(v, bool)
            }
        )
    extra = sorted(set(work) - set(out))
    if extra:
        raise BadRequest(f"{param}.{extra[0]}", f"not on the path of {type_name}")
    return out


def parse_typed(model: ModelSpec, body: Any) -> ParsedRequest:
    if not isinstance(body, dict):
        raise BadRequest("body", "expected a JSON object")
    type_name = _check_type(model, body.get("type"), "type")
    cid = _client_id(body.get("id"), "id")
    if "work" in body:
        work = parse_work(model, type_name, body["work"])
    else:
        work = _sample(model, type_name, _seed(cid or json.dumps(body, sort_keys=True)), {}, {})
    return ParsedRequest(cid, type_name, work, _bool(body, "stream", False))


def parse_chat(model: ModelSpec, body: Any) -> ParsedRequest:
    if not isinstance(body, dict):
        raise BadRequest("body", "expected a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages", "expected a non-empty list of messages")
    inputs: set[Modality] = set()
    counts: dict[Modality, int] = {}
    chars = 0
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest(f"messages[{i}]", "expected an object with a string 'role'")
        content = m.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(parts, list):
            raise BadRequest(f"messages[{i}].content", "expected a string or a list of content parts")
        for j, part in enumerate(parts):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in PART_MODALITY:
                raise BadRequest(
                    f"messages[{i}].content[{j}].type",
                    f"expected one of {', '.join(PART_MODALITY)}, got {json.dumps(kind)}",
                )
            modality = PART_MODALITY[kind]
            inputs.add(modality)
            counts[modality] = counts.get(modality, 0) + 1
            if kind == "text":
                chars += len(str(part.get("text", "")))
    modalities = body.get("modalities", ["text"])
    if (
        not isinstance(modalities, list)
        or not modalities
        or any(not isinstance(x, str) or x not in OUTPUTS for x in modalities)
    ):
        raise BadRequest(
            "modalities", f"expected a non-empty list of {', '.join(OUTPUTS)}, got {json.dumps(modalities)}"
        )
    output = (
        Modality.AUDIO
        if "audio" in modalities
        else Modality.IMAGE
        if "image" in modalities
        else Modality.TEXT
    )
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        raise BadRequest(key, f"expected a positive integer, got {json.dumps(max_tokens)}")
    stream = _bool(body, "stream", False)
    ext = body.get("omniplane", {})
    if not isinstance(ext, dict):
        raise BadRequest("omniplane", "expected an object with optional id, type, work")
    cid = _client_id(ext.get("id"), "omniplane.id")
    if "type" in ext:
        type_name = _check_type(model, ext["type"], "omniplane.type")
    else:
        matches = [rt.name for rt in model.request_types if set(rt.inputs) == inputs and rt.output is output]
        if not matches:
            have = "; ".join(
                f"{rt.name}: {'+'.join(m.value for m in rt.inputs)} -> {rt.output.value}"
                for rt in model.request_types
            )
            raise BadRequest(
                "messages",
                f"no request type of {model.name} takes "
                f"{'+'.join(sorted(m.value for m in inputs))} and returns {output.value} ({have})",
            )
        type_name = matches[0]
    opts = body.get("stream_options") or {}
    include_usage = bool(opts.get("include_usage", True)) if isinstance(opts, dict) else True
    if "work" in ext:
        work = parse_work(model, type_name, ext["work"], "omniplane.work")
    else:
        work = _sample(
            model,
            type_name,
            _seed(cid or json.dumps(body, sort_keys=True)),
            counts,
            {"prompt": math.ceil(chars / CHARS_PER_TOKEN) if chars else None, "max": max_tokens},
        )
    return ParsedRequest(cid, type_name, work, stream, include_usage)


def _sample(
    model: ModelSpec, type_name: str, seed: int, counts: dict[Modality, int], text: dict[str, int | None]
) -> ResolvedWork:
    """Sizes sampled from the type's distributions, then what the request itself says."""
    raw = {
        c: {q: float(v[0]) for q, v in qs.items()}
        for c, qs in sample_raw(model, type_name, np.random.default_rng(seed), 1).items()
    }
    first_llm = True
    for comp in model.ordered(model.path_of(type_name)):
        c = model.component(comp)
        if c.kind is ComponentKind.ENCODER:
            n = sum(counts.get(m, 0) for m in c.modalities)
            if n and "items" in raw.get(comp, {}):
                raw[comp]["items"] = float(n)
        elif c.kind is ComponentKind.LLM and first_llm:
            first_llm = False
            if text.get("prompt") and "prompt_tokens" in raw.get(comp, {}):
                raw[comp]["prompt_tokens"] = float(text["prompt"] or 1)
            if text.get("max") and "output_tokens" in raw.get(comp, {}):
                raw[comp]["output_tokens"] = min(raw[comp]["output_tokens"], float(text["max"] or 1))
    return resolve(model, type_name, raw)


# ---- responses -------------------------------------------------------------------------------
_SILENCE = base64.b64encode(
    b"RIFF"
    + struct.pack("<I", 36)
    + b"WAVEfmt "
    + struct.pack("<IHHIIHH", 16, 1, 1, 24000, 48000, 2, 16)
    + b"data"
    + struct.pack("<I", 0)
).decode()


def chunk(
    rid: str,
    model: str,
    created: int,
    delta: dict[str, Any],
    event: str,
    t_ms: float,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        "omniplane": {"event": event, "t_ms": t_ms, **extra},
    }
    if usage is not None:
        out["usage"] = usage
    return out


def text_delta(tokens: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"[emulated output: {tokens} tokens]"}


def audio_delta(rid: str) -> dict[str, Any]:
    return {"audio": {"id": f"audio-{rid}", "data": _SILENCE, "transcript": ""}}


def usage_of(model: ModelSpec, type_name: str, work: ResolvedWork) -> dict[str, int]:
    llms = [c for c in model.ordered(model.path_of(type_name)) if model.component(c).is_llm]
    prompt = int(work[llms[0]]["prompt_tokens"]) if llms else 0
    out = int(work[llms[0]]["output_tokens"]) if llms else 0
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}


def sse(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()
