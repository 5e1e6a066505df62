"""What the simulator needs from a cost model (``omniplane.perf.CostModel`` provides it).

A structural protocol, so queueing checks and tests can drive the same executor code with a
simple cost source (e.g. service time proportional to size).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class CostSource(Protocol):
    def llm_iteration_time(
        self,
        component: str,
        cfg: Any,
        *,
        prefill_tokens: int = 0,
        prefill_context: int = 0,
        decode_batch: int = 0,
        decode_context: int = 0,
        prefill_requests: int = 1,
    ) -> float: ...

    def encoder_time(self, component: str, cfg: Any, items: int, tokens: int) -> float: ...

    def dit_step_time(self, component: str, cfg: Any, batch: int, tokens: int) -> float: ...

    def vocoder_time(self, component: str, cfg: Any, batch: int, audio_seconds: float) -> float: ...

    def vae_time(self, component: str, cfg: Any, batch: int, pixels: float) -> float: ...

    def kv_capacity_tokens(self, components: Sequence[str], cfg: Any) -> int: ...
