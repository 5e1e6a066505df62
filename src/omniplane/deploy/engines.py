"""Stage engines a node replica can run, from one explicit factory.

``emulated``   :class:`omniplane.deploy.stage.StageHost`: the performance model's service times
               with real batching and queueing on CPU (the simulator's engines in real time).
``vllm``       :class:`omniplane.deploy.vllm_engine.VllmStage`: one real vLLM engine (``AsyncLLM``)
               per replica for nodes that host one LLM, e.g. the tiny fixture on vLLM's CPU build
               (imports ``vllm`` when built).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # annotations only: the CLI imports ENGINES at start-up, and this stays light
    from omniplane.deploy.clock import VirtualClock
    from omniplane.deploy.messages import OpenOrder, Released, StageEvent
    from omniplane.spec import ResolvedPlan

ENGINES = ("emulated", "vllm-omni", "vllm")  # the one list `deploy --engine` offers
STAGE_ENGINES = ("emulated", "vllm")  # vllm-omni: the runtime's own servers (cli/deploy_omni.py)


class StageEngine(Protocol):
    def open(self, order: OpenOrder) -> AsyncIterator[StageEvent]: ...

    def release(self, rid: int, rel: Released) -> bool: ...

    def upstream_done(self, rid: int, comp: str) -> bool: ...

    def stats(self) -> dict[str, Any]: ...


def make_stage_engine(
    name: str,
    plan: ResolvedPlan,
    node: str,
    group: int,
    clock: VirtualClock,
    *,
    replica: str = "",
    engine_model: str = "",
) -> StageEngine:
    pnode = plan.spec.node(node)
    if name == "emulated":
        from omniplane.deploy.stage import StageHost
        from omniplane.perf import CostModel
        from omniplane.perf.runtime import plan_pricing

        return StageHost(
            plan.model,
            node,
            pnode.components,
            pnode.executors[group],
            plan.gpu,
            CostModel(plan.model, runtime=plan_pricing(plan.spec.meta, plan.spec.name or "plan")),
            clock,
            replica=replica,
        )
    if name == "vllm":
        from omniplane.deploy.vllm_engine import VllmStage

        return VllmStage(plan, node, group, clock, replica=replica, model=engine_model)
    raise ValueError(f"unknown stage engine {name!r} (expected one of: {', '.join(STAGE_ENGINES)})")
