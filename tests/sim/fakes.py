"""A simple, transparent cost source for simulator tests (linear in sizes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LinearCost:
    step_s: float = 0.001  # fixed per LLM iteration
    prefill_s: float = 1e-5  # per prefill token
    decode_s: float = 2e-4  # per decoding sequence
    context_s: float = 1e-7  # per KV token read
    encode_s: float = 1e-5  # per encoder token
    dit_s: float = 1e-5  # per latent token per image
    vocode_s: float = 0.01  # per audio second per stream
    vae_s: float = 1e-8  # per pixel per image
    kv_tokens: int = 1_000_000
    calls: dict[str, int] = field(default_factory=dict)

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def llm_iteration_time(self, component: str, cfg: Any, *, prefill_tokens: int = 0,
                           prefill_context: int = 0, decode_batch: int = 0,
                           decode_context: int = 0, prefill_requests: int = 1) -> float:
        self._count("llm")
        return (self.step_s + self.prefill_s * prefill_tokens + self.decode_s * decode_batch
                + self.context_s * (decode_context + prefill_context))

    def encoder_time(self, component: str, cfg: Any, items: int, tokens: int) -> float:
        self._count("encoder")
        return 0.002 + self.encode_s * tokens

    def dit_step_time(self, component: str, cfg: Any, batch: int, tokens: int) -> float:
        self._count("dit")
        return 0.01 + self.dit_s * batch * tokens

    def vocoder_time(self, component: str, cfg: Any, batch: int, audio_seconds: float) -> float:
        self._count("vocoder")
        return 0.001 + self.vocode_s * audio_seconds * batch

    def vae_time(self, component: str, cfg: Any, batch: int, pixels: float) -> float:
        self._count("vae")
        return 0.005 + self.vae_s * batch * pixels

    def kv_capacity_tokens(self, components: Sequence[str], cfg: Any) -> int:
        return self.kv_tokens


def fake_cfg(gpu: Any, tp: int, max_batch: int) -> tuple[int, int]:
    return (tp, max_batch)


@dataclass(frozen=True, slots=True)
class Arrival:
    id: int
    arrival: float
    type: str
    work: dict[str, dict[str, float]]
