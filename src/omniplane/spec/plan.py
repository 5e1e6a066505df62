"""Physical plans: nodes (groups of components) with executors, and per-type routing.

A plan is what the planner emits, the simulator runs and the deployer deploys::

    kind: plan
    model: qwen3-omni          # catalog name or model file relative to the plan file
    gpu: A100-80GB
    gpus: 16                   # GPU budget the plan was made for
    nodes:
      - name: enc+thinker
        components: [image_encoder, video_encoder, thinker]
        executors:             # groups of identical executors
          - {count: 4, tp: 1, max_batch: 32}
      - name: aud
        components: [audio_encoder]
        executors: [{count: 1, tp: 1, max_batch: 16}]
    routes:                    # per type: alternative node sequences with probabilities
      T+I->T:
        - {nodes: [enc+thinker], p: 1.0}

Within a node, ``routing`` gives per type the probability of each executor group (default:
in proportion to the group's executor count); executors inside a group share its traffic
evenly. Every component on a type's path is served by exactly one node of each of its routes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from omniplane.spec.base import Document, Name, PositiveInt, SpecModel
from omniplane.spec.errors import Loc, SpecFieldError

Probability = Annotated[float, Field(ge=0, le=1)]
_TOL = 1e-6


class ExecutorGroup(SpecModel):
    count: PositiveInt
    tp: PositiveInt = 1
    max_batch: PositiveInt

    @property
    def gpus(self) -> int:
        return self.count * self.tp


class PlanNode(SpecModel):
    name: Name
    components: Annotated[list[Name], Field(min_length=1)]
    executors: Annotated[list[ExecutorGroup], Field(min_length=1)]
    routing: dict[Name, list[Probability]] = Field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return sum(g.gpus for g in self.executors)

    @property
    def executor_count(self) -> int:
        return sum(g.count for g in self.executors)

    def group_probs(self, type_name: str) -> list[float]:
        """Probability of each executor group for a type (default: by executor count)."""
        if type_name in self.routing:
            return list(self.routing[type_name])
        total = self.executor_count
        return [g.count / total for g in self.executors]


class Route(SpecModel):
    nodes: Annotated[list[Name], Field(min_length=1)]
    p: Probability


class PlanSpec(Document):
    """``kind: plan``. See the module docstring for the format."""

    kind: Literal["plan"] = "plan"
    name: str = ""
    model: str
    gpu: Name
    gpus: PositiveInt | None = None
    transfer_ms: Annotated[float, Field(ge=0)] = 10.0  # per disaggregated edge (Cornfigurator 5.2)
    nodes: Annotated[list[PlanNode], Field(min_length=1)]
    routes: Annotated[dict[Name, Annotated[list[Route], Field(min_length=1)]], Field(min_length=1)]
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _local(self) -> PlanSpec:
        issues: list[tuple[Loc, str]] = []
        names: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            if node.name in names:
                issues.append((("nodes", i, "name"), f"duplicate node name {node.name!r}"))
            names.setdefault(node.name, i)
            for t, probs in node.routing.items():
                loc: Loc = ("nodes", i, "routing", t)
                if len(probs) != len(node.executors):
                    issues.append(
                        (loc, f"{len(probs)} probabilities for {len(node.executors)} executor groups")
                    )
                elif abs(sum(probs) - 1) > _TOL:
                    issues.append((loc, f"probabilities must sum to 1, but sum to {sum(probs):.6g}"))
        for t, routes in self.routes.items():
            total = sum(r.p for r in routes)
            if abs(total - 1) > _TOL:
                issues.append((("routes", t), f"route probabilities sum to {total:.6g}, not 1"))
            for j, r in enumerate(routes):
                for k, n in enumerate(r.nodes):
                    if n not in names:
                        issues.append(
                            (("routes", t, j, "nodes", k),
                             f"unknown node {n!r} (expected one of: {', '.join(names)})")
                        )
        if self.gpus is not None and self.total_gpus > self.gpus:
            issues.append(
                (("nodes",), f"plan uses {self.total_gpus} GPUs but the budget (gpus) is {self.gpus}")
            )
        if issues:
            raise SpecFieldError(issues)
        return self

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    def node(self, name: str) -> PlanNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"plan has no node {name!r}")
