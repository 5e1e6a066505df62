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


class PriceBook:
    """Step prices one cost source gave, kept across the runs that share it: the planner
    simulates many plans (and each at several rates) on one request sample with one cost model,
    and the same components on the same executor configs see the same step sizes again. The
    cost model is a pure function of its arguments, so a remembered price is exact. Given to a
    run as ``RunSetup(prices=...)``; used only by runs priced by ``cost`` itself."""

    def __init__(self, cost: CostSource) -> None:
        self.cost = cost
        self._tables: dict[tuple[str, Any], dict[tuple[Any, ...], float]] = {}
        self._kv: dict[tuple[tuple[str, ...], Any], int] = {}

    def table(self, component: str, cfg: Any) -> dict[tuple[Any, ...], float]:
        """The prices of ``component``'s steps on ``cfg`` by size (an engine's ``prices``)."""
        return self._tables.setdefault((component, cfg), {})

    def kv_capacity_tokens(self, components: Sequence[str], cfg: Any) -> int:
        key = (tuple(components), cfg)
        hit = self._kv.get(key)
        if hit is None:
            hit = self._kv[key] = self.cost.kv_capacity_tokens(components, cfg)
        return hit
