"""Plans built in code for the deploy tests: every request type routed through the same nodes."""

from __future__ import annotations

from omniplane.spec import PlanNode, PlanSpec, ResolvedPlan, Route, load_gpus, load_model, resolve_plan


def plan_of(model_name: str, gpu: str, nodes: list[PlanNode], route: list[str]) -> ResolvedPlan:
    """``model_name`` on ``gpu`` with ``nodes``, every type taking ``route`` (catalog GPUs)."""
    model = load_model(model_name)
    spec = PlanSpec(model=model_name, gpu=gpu, nodes=nodes,
                    routes={t: [Route(nodes=route, p=1.0)] for t in model.type_names})
    return resolve_plan(spec, model, load_gpus())
