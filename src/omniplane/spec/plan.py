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

A plan written by the planner also says what it was made for, in two typed fields that every
command reads (``sim run``, ``rehearse``, ``loadgen`` through ``deploy``)::

    slo:                       # LatencyTargets: per-type first-response targets
      targets_ms: {ti2t: 244.5, ti2a: 338.9}
      derived_from: {policy: isolated_percentile, percentile: 25.0, multiplier: 1.0}
      how: {ti2t: "p25 x 1 of [...]", ...}
    prediction:                # the load it was evaluated under and the goodput predicted
      workload: qwen3-omni-servegen      # catalog name or file relative to the plan file
      mix: {ti2t: 0.2, ti2a: 0.1}        # the type mix evaluated (default: the workload's)
      offered_rps: 6.39
      requests: 1200
      seed: 0
      goodput_rps: {total: 6.1, per_type: {ti2t: 1.2, ti2a: 0.6}}

A node whose components are several vLLM-Omni stages runs them as separate processes on each of
its GPUs; ``sharing`` says how they share it and ``policy`` which scheduler runs them (optional:
files without them load as before)::

    nodes:
      - name: enc+thinker+talker+token2wav
        components: [vision_encoder, audio_encoder, thinker, talker, token2wav]
        executors: [{count: 1, tp: 1, max_batch: 32}]
        sharing: timeslice     # CUDA time slicing between the processes (default CUDA, no MPS); or mps
        # policy: unset        # vLLM-Omni's own schedulers (FCFS), what the planner priced

An executor group may run on another GPU kind than the plan's (a mixed fleet; the simulator
prices the group on its own kind, and so does the cost attribution)::

    executors: [{count: 2, tp: 1, max_batch: 32, gpu: L40S}]   # default: the plan's gpu

A plan file from before these fields kept the same numbers in ``meta`` (``latency_targets_ms``,
``predicted_goodput_rps``, ``evaluated_at_rps``, ``provenance``); they are read into the typed
fields when such a file loads. A plan without ``slo`` (hand-written, like the catalog's) is
judged by the targets its workload's SLO policy resolves to, and the commands say so.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from omniplane.spec.base import (
    Document,
    Fraction,
    Name,
    NonNegativeFloat,
    NotBool,
    PositiveFloat,
    PositiveInt,
    SpecModel,
)
from omniplane.spec.errors import Loc, SpecFieldError
from omniplane.spec.executor import TP, Batch
from omniplane.spec.slo import LatencyTargets
from omniplane.spec.workload import check_fractions

Probability = Fraction
_TOL = 1e-6
Sharing = Literal["timeslice", "mps"]  # a shared-GPU node's sharing mode (module docstring)


class ExecutorGroup(SpecModel):
    count: Annotated[int, NotBool, Field(gt=0, le=10_000)]  # assumption: beyond any one cluster
    tp: TP = 1
    max_batch: Batch
    # the group's GPU kind (a catalog kind or alias); None: the plan's ``gpu`` (mixed fleets,
    # module docstring)
    gpu: Name | None = None

    @property
    def gpus(self) -> int:
        return self.count * self.tp


class PlanNode(SpecModel):
    name: Name
    components: Annotated[list[Name], Field(min_length=1)]
    executors: Annotated[list[ExecutorGroup], Field(min_length=1)]
    routing: dict[Name, list[Probability]] = Field(default_factory=dict)
    # ``deploy --engine vllm-omni``: the omniplane policy for the node's vLLM-Omni stages (fcfs,
    # horizon, import:MODULE:NAME; docs/reference/vllm.md); None runs vLLM-Omni's own schedulers
    policy: str | None = Field(default=None, min_length=1)
    # several vLLM-Omni stages on each of the node's GPUs (separate processes): how they share it
    # (module docstring); None: one stage per GPU, or a plan from before this field
    sharing: Sharing | None = None

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


NonNegative = Annotated[float, Field(ge=0)]


class PredictedGoodput(SpecModel):
    total: NonNegative
    per_type: dict[Name, NonNegative] = Field(default_factory=dict)


class Prediction(SpecModel):
    """The load a plan was evaluated under and the goodput predicted there (module docstring)."""

    workload: Annotated[str, Field(min_length=1)]
    mix: dict[Name, Fraction] | None = None
    offered_rps: PositiveFloat
    requests: PositiveInt
    seed: int = 0
    goodput_rps: PredictedGoodput

    @model_validator(mode="after")
    def _mix(self) -> Prediction:
        if self.mix is not None:
            check_fractions(self.mix, "mix")
        return self


COLLECT = "plan_issues"  # validation context key: collect the plan's own issues instead of raising


class PlanSpec(Document):
    """``kind: plan``. See the module docstring for the format."""

    kind: Literal["plan"] = "plan"
    name: str = ""
    model: str
    gpu: Name
    gpus: PositiveInt | None = None
    transfer_ms: NonNegativeFloat = 10.0  # per disaggregated edge (Cornfigurator 5.2)
    nodes: Annotated[list[PlanNode], Field(min_length=1)]
    routes: Annotated[dict[Name, Annotated[list[Route], Field(min_length=1)]], Field(min_length=1)]
    slo: LatencyTargets | None = None
    prediction: Prediction | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_older_meta(cls, data: Any) -> Any:
        """A plan file written before ``slo`` and ``prediction`` existed: read their numbers
        from ``meta`` (module docstring)."""
        if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
            return data
        meta = dict(data["meta"])
        targets = meta.get("latency_targets_ms")
        if "slo" not in data and isinstance(targets, dict) and targets:
            how = dict.fromkeys(targets, "meta.latency_targets_ms (older plan file)")
            data = {**data, "slo": {"targets_ms": targets, "how": how}}
            meta.pop("latency_targets_ms")
        good, rate = meta.get("predicted_goodput_rps"), meta.get("evaluated_at_rps")
        prov: dict[str, Any] = meta["provenance"] if isinstance(meta.get("provenance"), dict) else {}
        if "prediction" not in data and isinstance(good, dict) and rate and prov.get("workload"):
            options: dict[str, Any] = prov["options"] if isinstance(prov.get("options"), dict) else {}
            data = {**data, "prediction": {
                "workload": prov["workload"], "mix": prov.get("mix"), "offered_rps": rate,
                "requests": prov.get("simulated_requests", options.get("sim_requests", 1)),
                "seed": options.get("seed", 0),
                "goodput_rps": {k: v for k, v in good.items() if k in ("total", "per_type")}}}
            meta.pop("predicted_goodput_rps")
            meta.pop("evaluated_at_rps")
        return {**data, "meta": meta}

    @model_validator(mode="after")
    def _local(self, info: ValidationInfo) -> PlanSpec:
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
                    issues.append((loc, f"probabilities must sum to 1, but sum to {sum(probs):.12g}"))
        for t, routes in self.routes.items():
            total = sum(r.p for r in routes)
            if abs(total - 1) > _TOL:
                issues.append((("routes", t), f"route probabilities sum to {total:.12g}, not 1"))
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
            bucket = (info.context or {}).get(COLLECT)
            if not isinstance(bucket, list):
                raise SpecFieldError(issues)
            bucket.extend(issues)  # load_plan: these and the checks against the model, all at once
        return self

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    def group_gpu(self, group: ExecutorGroup) -> str:
        """The GPU kind a group runs on, as written (its own ``gpu``, else the plan's)."""
        return group.gpu if group.gpu is not None else self.gpu

    def gpus_by_kind(self) -> dict[str, int]:
        """GPUs per kind, as written (a plan on one kind: ``{gpu: total_gpus}``)."""
        out: dict[str, int] = {}
        for n in self.nodes:
            for g in n.executors:
                k = self.group_gpu(g)
                out[k] = out.get(k, 0) + g.gpus
        return out

    def node(self, name: str) -> PlanNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"plan has no node {name!r}")
