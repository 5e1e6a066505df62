"""Who may send work to a deployment, and how much: API keys and request limits.

No Ray, no web framework. The ingress (``serve_app.Ingress``) asks :class:`Guard` about every
request before it reads the body:

* **API keys** (as vLLM's ``--api-key``): when keys are set, every request except
  ``GET /health`` must carry ``Authorization: Bearer <key>``; otherwise HTTP 401. Keys are kept
  as SHA-256 digests (the deployment's arguments never hold a key in clear) and compared with
  :func:`hmac.compare_digest` against every key, so the time taken does not depend on how much
  of a key matched or on which key it was.
* **Limits**: a body larger than ``max_body_bytes`` is refused with HTTP 413 before it is read
  (by its ``Content-Length``, or as soon as a streamed body passes the limit), and so is a
  request whose prompt is longer than ``max_prompt_tokens`` (counted as the ingress counts it:
  the typed API's ``prompt_tokens``, the chat API's text at 4 characters per token), and so is
  any work quantity over its limit in :data:`MAX_WORK` (encoder items/tokens/seconds, output
  tokens, audio seconds, diffusion steps/pixels): every request's work is bounded before
  admission. A body not all in within ``body_timeout_s`` is answered HTTP 408.

``omniplane deploy`` refuses to bind beyond loopback without a key (:func:`is_loopback`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

API_KEY_ENV = "OMNIPLANE_API_KEY"
PUBLIC = (("GET", "/health"),)  # reachable without a key: liveness only, says nothing else
MAX_BODY_BYTES = 8 * 2**20  # assumption: a chat request with a few inline images; vLLM sets none
MAX_PROMPT_TOKENS = 65_536  # assumption: Qwen3-Omni's 64k context (max_position_embeddings 65536)
BODY_TIMEOUT_S = 30.0  # assumption: wall seconds for a whole body (8 MiB at >= 2 Mbit/s)
# Work quantities (omniplane.spec.work) a request may ask for; prompt_tokens uses max_prompt_tokens.
MAX_WORK: dict[str, float] = {
    "items": 64,  # assumption: media items per request (a few dozen images or clips)
    "tokens": MAX_PROMPT_TOKENS,  # encoder/DiT tokens: encoder tokens enter the LLM's 64k context
    "seconds": 3_600,  # assumption: an hour of input audio or video
    "output_tokens": MAX_PROMPT_TOKENS,  # the output shares the same 64k context
    "audio_seconds": 3_600,  # assumption: an hour of generated speech
    "steps": 1_000,  # assumption: diffusion steps (typical schedules use 20-50)
    "pixels": 4096 * 4096,  # assumption: a 16-megapixel image
}
MAX_OTHER = 1_000_000  # assumption: any other quantity a request names (none is used unbounded)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); False for anything a
    client on another machine could reach (0.0.0.0, ::, a routable address, a host name)."""
    text = host.strip().strip("[]")
    if text.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


class Refused(Exception):
    """An HTTP error answer: status, OpenAI-style body, headers."""

    def __init__(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None,
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.headers, self.param = status, kind, headers or {}, param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.status}}


def unauthorized() -> Refused:
    """401; the connection ends with it (``Connection: close``), so a body sent with a missing
    or wrong key is not read to its end."""
    return Refused(401, "authentication_error",
                   "missing or wrong API key: send 'Authorization: Bearer <key>'",
                   {"WWW-Authenticate": "Bearer", "Connection": "close"})


def body_timeout(seconds: float) -> Refused:
    return Refused(408, "request_timeout", f"the body did not arrive within {seconds:g} s")


def too_large(what: str, size: int, limit: int, unit: str) -> Refused:
    return Refused(413, "request_too_large", f"{what} of {size:,} {unit} is over the limit of {limit:,}")


@dataclass(frozen=True)
class Guard:
    """API-key digests (none: open, for loopback) and the request limits."""

    key_digests: tuple[str, ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES
    max_prompt_tokens: int = MAX_PROMPT_TOKENS
    body_timeout_s: float = BODY_TIMEOUT_S
    _raw: tuple[bytes, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1 or self.max_prompt_tokens < 1 or not self.body_timeout_s > 0:
            raise ValueError("request limits must be >= 1 and body_timeout_s > 0")
        object.__setattr__(self, "_raw", tuple(bytes.fromhex(d) for d in self.key_digests))

    @classmethod
    def with_keys(cls, keys: Iterable[str], **limits: Any) -> Guard:
        return cls(tuple(digest(k) for k in keys if k), **limits)

    @property
    def keyed(self) -> bool:
        return bool(self.key_digests)

    def authorize(self, method: str, path: str, authorization: str | None) -> None:
        """Raise 401 unless the request may pass: no keys set, a public path, or a right key."""
        if not self.keyed or (method.upper(), path.rstrip("/") or "/") in PUBLIC:
            return
        scheme, _, token = (authorization or "").partition(" ")
        given = hashlib.sha256(token.strip().encode("utf-8")).digest()
        ok = False
        for known in self._raw:  # every key, whatever matched
            ok |= hmac.compare_digest(given, known)
        if scheme.lower() != "bearer" or not ok:
            raise unauthorized()

    def check_length(self, content_length: str | None) -> None:
        """413 when the declared body is over the limit (before reading it)."""
        if content_length is not None and content_length.strip().isdigit():
            size = int(content_length)
            if size > self.max_body_bytes:
                raise too_large("a body", size, self.max_body_bytes, "bytes")

    def check_body(self, received: int) -> None:
        """413 once a (streamed) body passes the limit."""
        if received > self.max_body_bytes:
            raise too_large("a body", received, self.max_body_bytes, "bytes (or more)")

    def check_prompt(self, tokens: float) -> None:
        if tokens > self.max_prompt_tokens:
            raise too_large("a prompt", int(tokens), self.max_prompt_tokens, "tokens")

    def check_work(self, work: Mapping[str, Mapping[str, float]], param: str = "work") -> None:
        """413 naming the first quantity over its limit (``work.<component>.<quantity>``)."""
        for comp, quantities in work.items():
            for q, v in quantities.items():
                limit = self.max_prompt_tokens if q == "prompt_tokens" else MAX_WORK.get(q, MAX_OTHER)
                if v > limit:
                    raise Refused(413, "request_too_large",
                                  f"{param}.{comp}.{q} of {v:,.0f} is over the limit of {limit:,.0f}",
                                  param=f"{param}.{comp}.{q}")
