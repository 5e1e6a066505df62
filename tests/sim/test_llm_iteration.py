"""What the LLM engine tells the cost model about each iteration."""

from __future__ import annotations

from typing import Any

from tests.sim.fakes import Arrival, LinearCost
from tests.sim.helpers import make_sim
from tests.spec.builders import tiny_model, tiny_plan


class Recording(LinearCost):
    def __init__(self) -> None:
        super().__init__()
        self.iterations: list[dict[str, int]] = []

    def llm_iteration_time(self, component: str, cfg: Any, **kw: int) -> float:  # type: ignore[override]
        self.iterations.append(dict(kw))
        return super().llm_iteration_time(component, cfg, **kw)


def test_prompts_prefilled_together_are_priced_as_separate_sequences() -> None:
    """Attention cost grows with each prompt's own length, not with the chunk total: the
    engine passes how many prompts share the iteration (the cost model's prefill_requests)."""
    cost = Recording()
    arrivals = [Arrival(i, 0.0 if i == 0 else 1e-4, "t2t",
                        {"thinker": {"prompt_tokens": 300, "output_tokens": 2}}) for i in range(3)]
    plan = tiny_plan()
    plan["nodes"][0]["executors"][0]["count"] = 1
    sim = make_sim(tiny_model(), plan, arrivals, cost)
    sim.run()
    prefills = [it for it in cost.iterations if it.get("prefill_tokens", 0) > 0]
    assert [(it["prefill_tokens"], it["prefill_requests"]) for it in prefills] == [(300, 1), (600, 2)]
