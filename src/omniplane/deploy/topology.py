"""A plan as vLLM-Omni deployments: which plan nodes form one vLLM-Omni pipeline, and whether
vLLM-Omni can run it.

vLLM-Omni 0.30 runs a model as one pipeline of stages (Qwen3-Omni: thinker with every encoder,
talker, code2wav; :mod:`omniplane.spec.layout`) per deployment, with per-stage replicas,
devices, TP, max batch and memory share. A plan maps onto that when:

- every node runs a union of whole stages (a node with several stages runs them on the same
  GPUs, one process per stage sharing each GPU);
- a **deployment** is a set of nodes that routes connect (two nodes on one route are in one
  deployment; so are nodes linked through a chain of routes), and every deployment runs every
  stage, each stage on one of its nodes, that node's executor groups all alike (one TP and one
  max batch per stage, as vLLM-Omni's deploy file has one per stage).

Anything else (an encoder split off the thinker, a part pipeline) is refused with
:class:`NotRealisable`, naming the node or deployment and what is missing: such plans come
from the planner's ideal space (``--runtime ideal``).
"""

from __future__ import annotations

from dataclasses import dataclass

from omniplane.spec import ResolvedPlan
from omniplane.spec.layout import VllmOmniLayout, layout_models
from omniplane.spec.load import load_layout

IDEAL_HINT = (
    "the plan was probably made with `--runtime ideal` (encoder disaggregation, merged executors: "
    "what-if plans no runtime omniplane supports can run); plan with `--runtime vllm-omni` for one "
    "vLLM-Omni can run"
)


class NotRealisable(ValueError):
    """The plan is not a set of whole vLLM-Omni pipelines (module docstring)."""


@dataclass(frozen=True)
class StageGroup:
    """One node of a deployment: the stages its executors run together, and how many."""

    node: str
    stage_ids: tuple[int, ...]
    count: int  # executors (replicas of each of the stages)
    tp: int  # GPUs per executor (the stages' tensor_parallel_size)
    max_batch: int  # the stages' max_num_seqs
    gpu: str = ""  # the GPU kind its executors run on (catalog name; "": the plan's)

    @property
    def gpus(self) -> int:
        return self.count * self.tp

    @property
    def shares_gpu(self) -> bool:
        return len(self.stage_ids) > 1


@dataclass(frozen=True)
class Deployment:
    """One vLLM-Omni pipeline: its plan nodes as stage groups, in pipeline order."""

    name: str
    groups: tuple[StageGroup, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(g.node for g in self.groups)

    @property
    def gpus(self) -> int:
        return sum(g.gpus for g in self.groups)

    def group_of(self, stage_id: int) -> StageGroup:
        return next(g for g in self.groups if stage_id in g.stage_ids)


def plan_layout(plan: ResolvedPlan) -> VllmOmniLayout:
    layout = load_layout(plan.model.name)
    if layout is None:
        raise NotRealisable(
            f"plan model {plan.model.name!r}: vLLM-Omni 0.30 has no pipeline omniplane knows for it "
            f"(catalog layouts: {', '.join(layout_models())}); it cannot be exported to vLLM-Omni"
        )
    return layout


def node_groups(plan: ResolvedPlan) -> list[set[str]]:
    """The plan's nodes grouped into deployments: connected through routes, in plan order."""
    parent = {n.name: n.name for n in plan.spec.nodes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for routes in plan.spec.routes.values():
        for r in routes:
            for a, b in zip(r.nodes, r.nodes[1:], strict=False):
                parent[find(b)] = find(a)
    groups: dict[str, set[str]] = {}
    for n in plan.spec.nodes:
        groups.setdefault(find(n.name), set()).add(n.name)
    return list(groups.values())


def _node_stages(plan: ResolvedPlan, layout: VllmOmniLayout, node: str) -> tuple[tuple[int, ...], list[str]]:
    """(stage ids the node runs whole, problems)."""
    comps = list(plan.spec.node(node).components)
    problems, ids = [], []
    for c in comps:
        try:
            layout.stage_of(c)
        except KeyError:
            problems.append(f"plan node {node!r}: component {c!r} is in no vLLM-Omni stage of {layout.model}")
    for st in layout.stages:
        here = [c for c in st.components if c in comps]
        if not here:
            continue
        missing = [c for c in st.components if c not in comps]
        if missing:
            problems.append(
                f"plan node {node!r} runs {here} of vLLM-Omni stage {st.stage_id} {st.model_stage!r} "
                f"without {missing}: vLLM-Omni {layout.vllm_omni} runs a stage whole "
                f"({st.model_stage}: {', '.join(st.components)})"
            )
        else:
            ids.append(st.stage_id)
    return tuple(ids), problems


def deployments(plan: ResolvedPlan) -> list[Deployment]:
    """The plan's vLLM-Omni deployments ``d0, d1, ...`` (module docstring); raises
    :class:`NotRealisable` listing every problem."""
    layout = plan_layout(plan)
    problems: list[str] = []
    stages_of: dict[str, tuple[int, ...]] = {}
    for n in plan.spec.nodes:
        stages_of[n.name], bad = _node_stages(plan, layout, n.name)
        problems += bad
    out: list[Deployment] = []
    order = {n.name: i for i, n in enumerate(plan.spec.nodes)}
    for i, names in enumerate(node_groups(plan)):
        nodes = sorted(names, key=order.__getitem__)
        dep, groups = f"d{i}", []
        where = f"deployment {dep} (nodes {', '.join(nodes)})"
        runs: dict[int, str] = {}
        for name in nodes:
            node = plan.spec.node(name)
            shapes = {(g.tp, g.max_batch) for g in node.executors}
            if len(shapes) > 1:
                problems.append(
                    f"plan node {name!r}: executor groups with different TP / max batch {sorted(shapes)}; "
                    "vLLM-Omni gives a stage one tensor_parallel_size and one max_num_seqs"
                )
            for sid in stages_of[name]:
                if sid in runs:
                    problems.append(
                        f"{where}: stage {sid} {layout.stages[sid].model_stage!r} runs on nodes "
                        f"{runs[sid]!r} and {name!r}; vLLM-Omni runs a stage's replicas with one "
                        "configuration"
                    )
                runs.setdefault(sid, name)
            tp, mb = node.executors[0].tp, node.executors[0].max_batch
            kinds = {plan.spec.group_gpu(g) for g in node.executors}
            if len(kinds) > 1:
                problems.append(f"plan node {name!r}: executor groups on GPU kinds {sorted(kinds)}; "
                                "vLLM-Omni runs a stage's replicas with one configuration (one kind a node)")
            kind = _kind(plan, node.executors[0].gpu)
            if stages_of[name]:
                groups.append(StageGroup(name, stages_of[name], sum(g.count for g in node.executors), tp, mb,
                                         kind))
        missing = [st for st in layout.stages if st.stage_id not in runs]
        if missing:
            problems.append(
                f"{where} does not run stage(s) "
                + ", ".join(f"{st.stage_id} {st.model_stage!r} ({', '.join(st.components)})"
                            for st in missing)
                + f": vLLM-Omni {layout.vllm_omni} instantiates the whole pipeline of {layout.model} "
                "in every deployment"
            )
        groups.sort(key=lambda g: min(g.stage_ids))
        out.append(Deployment(dep, tuple(groups)))
    if problems:
        raise NotRealisable(
            f"plan {plan.spec.name or plan.spec.model!r} cannot run on vLLM-Omni {layout.vllm_omni}:\n- "
            + "\n- ".join(problems)
            + f"\n{IDEAL_HINT}"
        )
    return out


def _kind(plan: ResolvedPlan, gpu: str | None) -> str:
    """A group's kind as a catalog name ("" for the plan's own)."""
    if gpu is None:
        return ""
    from omniplane.spec import load_gpus

    name = load_gpus().get(gpu).name
    return "" if name == plan.gpu.name else name


def deployment_of(deps: list[Deployment], node: str) -> Deployment:
    return next(d for d in deps if node in d.nodes)
