"""Runtime profiles: the plan space is what the runtime can instantiate (Cornfigurator 3.1: "the
set of all executor types the runtime can instantiate").

=========  ===========================================================================================
vllm-omni  vLLM-Omni 0.30 (the pinned release), for models with a stock layout in the catalog
           (``catalog/layouts/vllm-omni``). vLLM-Omni builds every stage of a model's pipeline in one
           deployment (``vllm_omni/config/stage_config.py`` ``merge_pipeline_deploy``), its thinker
           stage loads every encoder, and a text-output request ends at the thinker stage. A plan is
           1..k_s deployments side by side behind the router, each the WHOLE pipeline; a node is a
           stage (its components together) or stages the layout places on shared GPUs; per node the
           planner picks replicas (``num_replicas``), TP and max batch (``max_num_seqs``), and routes
           each type across deployments. Memory is sized as the runtime loads it
           (:mod:`omniplane.perf.stage_memory`): a node whose weights, runtime reserve and one p95
           sequence do not fit, or whose KV does not hold its max batch at the workload's mean
           context, is never searched.
ideal      Algorithm 1's whole space (encoders apart from the thinker, any union of request paths,
           merged executors), sized by :mod:`omniplane.perf.memory`. What-if only: no runtime
           omniplane supports can run most of its plans, and the plan says so.
=========  ===========================================================================================

Stages may share GPUs in every way vLLM-Omni expresses (several stages' ``devices`` naming the
same GPU, each stage its own process): a deployment's nodes are any set partition of its stages
(:func:`groupings`; 3 stages: 5 partitions), kept when the stages of each node fit one device as
the runtime loads them (:func:`setup`; the per-device sum of weights, reserve and KV within what
vLLM allows). A node of several stages is a shared GPU: the plan says its sharing mode and
scheduler (:data:`SHARING`, :data:`SHARED_SCHEDULER`; :func:`mark_shared`). Pricing: the
simulator, which picks the plan, runs the node's stages as separate processes on one GPU under
that mode (:mod:`omniplane.sim.processes`: CUDA time slicing, one stage's host time leaving the
GPU to the others); the search's flow and Monte Carlo estimates before it still price the node
as one executor whose stages take turns one step at a time (no overlap: conservative). MPS and
omniplane's horizon scheduler are not searched: the plan always says ``timeslice`` and
vLLM-Omni's own scheduler.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omniplane.perf import CostModel, ExecutorConfig, InfeasibleConfig
from omniplane.perf.stage_memory import Context, StageMemoryError, contexts, size_device
from omniplane.plan.baselines import vllm_omni
from omniplane.plan.costs import CostTable
from omniplane.plan.enumerate import subplan_of
from omniplane.plan.logical import LogicalPlan, Node, compose
from omniplane.plan.problem import Problem
from omniplane.plan.space import FULL, Space
from omniplane.spec import ModelSpec, PlanSpec, ResolvedWorkload
from omniplane.spec.layout import VllmOmniLayout
from omniplane.spec.load import load_layout

RUNTIMES = ("vllm-omni", "ideal")
# The cost model's runtime (omniplane.perf.runtime) that prices a plan space's executors: vLLM-Omni
# runs vLLM v1 with CUDA graphs, fitted to vLLM-Omni's CI (docs/decisions/0018-plans-priced-by-
# their-runtime.md); unlisted spaces keep the calibration's default (cornserve, the stack of
# Cornfigurator's Table 2, which the ideal space and the reproduction are compared with)
PRICED_WITH = {"vllm-omni": "vllm-v1"}


def pricing_runtime(name: str) -> str | None:
    """The perf runtime that prices runtime ``name``'s plans (None: the calibration's default)."""
    return PRICED_WITH.get(name)
CONTEXT_REQUESTS = 2000  # requests whose contexts size KV (as ``omniplane plan``'s memory table)
SHARED = ("stages that share a GPU run as separate processes, CUDA time-sliced (the default, no MPS), "
          "as simulated; the search's estimates before simulation price them as taking turns one step at "
          "a time; MPS and the horizon scheduler are not searched")
SHARING = "timeslice"  # the sharing mode a shared-GPU node is priced under (CUDA's default)
SHARED_SCHEDULER = "vLLM-Omni's own (FCFS)"  # the scheduler priced (a plan node's policy unset)


class BatchTooLarge(InfeasibleConfig):
    """The node fits, but its KV holds only ``fits`` sequences of the mean context, fewer than the
    max batch asked (the cost table then offers the max batch ``fits``)."""

    def __init__(self, components: tuple[str, ...], gpu: str, tp: int, needed: float, available: float,
                 detail: str, fits: int) -> None:
        super().__init__(components, gpu, tp, needed, available, detail)
        self.fits = fits


class NotWholeStages(InfeasibleConfig):
    """A node that is not a union of whole vLLM-Omni stages: the runtime cannot instantiate it."""

    def __init__(self, components: tuple[str, ...], gpu: str, tp: int, loaded: list[str]) -> None:
        ValueError.__init__(self, f"executor [{'+'.join(components)}] is not a union of whole vLLM-Omni "
                                  f"stages (its stages load {loaded})")
        self.components, self.gpu, self.tp = components, gpu, tp
        self.needed = self.available = 0.0


class RuntimeUnavailable(ValueError):
    """A runtime asked for a model it cannot run (the message says why)."""


def default_runtime(model: ModelSpec) -> str:
    """``vllm-omni`` for a model with a stock vLLM-Omni layout, else ``ideal``."""
    return "vllm-omni" if load_layout(model.name) is not None else "ideal"


def no_pipeline(model: ModelSpec) -> str:
    return (f"vLLM-Omni 0.30 has no pipeline for {model.name} (no stock layout in the catalog's "
            "layouts/vllm-omni)")


def ideal_note(model: ModelSpec) -> str:
    """Why a plan of the ideal space is not deployable."""
    why = ("vLLM-Omni runs the whole pipeline in every deployment (thinker stage with all its "
           "encoders, every stage), so part-pipeline nodes, encoders apart from the thinker and "
           "merged executors across stages do not run on it")
    if load_layout(model.name) is None:
        why = no_pipeline(model)
    return f"ideal plan space: not deployable on any runtime omniplane supports ({why})"


def set_partitions(items: Sequence[int]) -> list[list[tuple[int, ...]]]:
    """Every set partition of ``items`` (Bell number many: 1, 2, 5, 15 for 1..4 items), blocks in
    order of their first item."""
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out: list[list[tuple[int, ...]]] = []
    for part in set_partitions(rest):
        out.append([(first,), *part])
        for k in range(len(part)):
            out.append([*part[:k], (first, *part[k]), *part[k + 1:]])
    return out


def groupings(model: ModelSpec, layout: VllmOmniLayout) -> list[tuple[Node, ...]]:
    """One deployment's node partitions: every set partition of the layout's stages whose nodes
    (the union of their stages' components) an executor type hosts; each stage alone first.
    Memory is checked where the GPU is known (:func:`setup`)."""
    stages = [frozenset(st.components) for st in layout.stages]
    out: list[tuple[Node, ...]] = []
    for part in sorted(set_partitions(list(range(len(stages)))), key=len, reverse=True):
        nodes = tuple(frozenset().union(*(stages[i] for i in block)) for block in part)
        if all(model.executor_type_for(n) is not None for n in nodes):
            out.append(nodes)
    return out


def shared_gpu(layout: VllmOmniLayout, node: Iterable[str]) -> bool:
    """Whether ``node`` holds several stages (separate processes on one GPU)."""
    return len({layout.stage_of(c).stage_id for c in node}) > 1


def runtime_space(model: ModelSpec, k_s: int = 2, fits: Callable[[Node], bool] | None = None) -> Space:
    """vLLM-Omni's realisable space for ``model`` (module docstring): deployments of the
    :func:`groupings` whose every node ``fits`` (default: all); :class:`RuntimeUnavailable` when
    vLLM-Omni has no pipeline for it or no grouping fits."""
    layout = load_layout(model.name)
    if layout is None:
        raise RuntimeUnavailable(f"--runtime vllm-omni: {no_pipeline(model)}; plan it with --runtime ideal")
    groups = groupings(model, layout)
    if not groups:
        raise RuntimeUnavailable(f"--runtime vllm-omni: no executor type of {model.name} hosts its stages")
    if fits is not None:
        groups = [g for g in groups if all(fits(n) for n in g)]
        if not groups:
            raise RuntimeUnavailable(f"--runtime vllm-omni: no grouping of {model.name}'s stages fits "
                                     "the GPU (every node's weights, reserve and KV exceed its memory)")
    subs = [subplan_of(model, g) for g in groups]
    n_types = len(model.type_names)
    logical: list[LogicalPlan] = []
    for k in range(1, k_s + 1):
        for combo in itertools.combinations_with_replacement(range(len(subs)), k):
            logical.append(compose(tuple(subs[i] for i in combo), n_types))
    shared = any(shared_gpu(layout, n) for g in groups for n in g)
    desc = (f"vLLM-Omni {layout.vllm_omni}: 1..{k_s} whole-pipeline deployments of "
            + " or ".join(" | ".join("+".join(model.ordered(n)) for n in g) for g in groups))
    return Space("vllm-omni-runtime", desc, tuple(logical), approximation=SHARED if shared else "")


def mark_shared(spec: PlanSpec, model: ModelSpec) -> PlanSpec:
    """``spec`` with ``sharing`` (:data:`SHARING`) on every node that holds several vLLM-Omni
    stages; ``policy`` stays unset: vLLM-Omni's own schedulers (FCFS), the scheduler priced."""
    layout = load_layout(model.name)
    if layout is None:
        return spec
    nodes = [n.model_copy(update={"sharing": SHARING})
             if shared_gpu(layout, n.components) and n.sharing is None else n for n in spec.nodes]
    return spec.model_copy(update={"nodes": nodes})


@dataclass(frozen=True)
class StageFit:
    """The planner's fit check in the vLLM-Omni runtime: a node must be a union of whole stages;
    its stages are sized on one device as vLLM-Omni loads them (:func:`size_device`), and the KV
    of each stage must hold the max batch at the workload's mean context. Returns the KV tokens
    per LLM (the smallest over the node's stages); raises :class:`InfeasibleConfig`."""

    model: ModelSpec
    layout: VllmOmniLayout
    ctx: Mapping[str, Context]

    def __call__(self, comps: Sequence[str], cfg: ExecutorConfig) -> int:
        names = tuple(comps)
        stages = [st for st in self.layout.stages if set(st.components) & set(names)]
        loaded = {c for st in stages for c in st.components}
        if loaded != set(names):
            raise NotWholeStages(names, cfg.gpu.name, cfg.tp, sorted(loaded))
        entries = [self._entry(st.stage_id, cfg) for st in stages]
        try:
            dev = size_device(self.model, self.layout, entries, cfg.gpu, self.ctx)
        except StageMemoryError as exc:
            raise InfeasibleConfig(names, cfg.gpu.name, cfg.tp, cfg.gpu.memory_bytes, cfg.gpu.memory_bytes,
                                   str(exc)) from exc
        kv = [s for s in dev.stages if s.kv_per_token and s.context is not None]
        for s in kv:
            assert s.context is not None
            fit = s.seqs(s.context.mean)
            if fit < cfg.max_batch:
                need = s.fixed_bytes + cfg.max_batch * s.context.blocks(s.context.mean) * s.kv_per_token
                raise BatchTooLarge(names, cfg.gpu.name, cfg.tp, need, s.utilization * s.capacity_bytes,
                                    f"stage {s.name}: KV holds {fit} sequences of the mean context "
                                    f"{s.context.mean:.0f} tokens, max batch {cfg.max_batch}", fit)
        return min((s.kv_tokens for s in kv), default=0)

    def _entry(self, stage_id: int, cfg: ExecutorConfig) -> dict[str, Any]:
        base = {k: v for k, v in self.layout.stage_deploy(stage_id).items()
                if k in ("max_num_batched_tokens", "enforce_eager")}
        return {**base, "stage_id": stage_id, "tensor_parallel_size": cfg.tp, "max_num_seqs": cfg.max_batch}


def stage_fit(model: ModelSpec, workload: ResolvedWorkload, mix: Mapping[str, float] | None,
              seed: int = 0) -> StageFit:
    """:class:`StageFit` with KV contexts of ``CONTEXT_REQUESTS`` requests of the workload."""
    from omniplane.workload.generate import generate

    layout = load_layout(model.name)
    if layout is None:
        raise RuntimeUnavailable(f"--runtime vllm-omni: {no_pipeline(model)}")
    reqs = generate(workload, n=CONTEXT_REQUESTS, seed=seed, mix=dict(mix) if mix is not None else None)
    return StageFit(model, layout, contexts(model, [r.work for r in reqs]))


def label(model: ModelSpec, runtime: str, space: Space | None = None) -> dict[str, Any]:
    """The plan's ``meta.runtime``: which runtime's space it was searched in, deployable or not."""
    if runtime == "ideal":
        return {"name": "ideal", "deployable": False, "why": ideal_note(model)}
    layout = load_layout(model.name)
    out: dict[str, Any] = {"name": "vllm-omni", "deployable": True,
                           "release": layout.vllm_omni if layout else None,
                           "space": space.description if space else None}
    if space is not None and space.approximation:
        out["approximation"] = space.approximation
        out["shared_gpu"] = {"sharing": SHARING, "scheduler": SHARED_SCHEDULER}
    return out



@dataclass(frozen=True)
class Setup:
    """What ``omniplane plan`` searches in a runtime: the cost table (its fit check), the space and
    the baselines (None: every baseline of the model; the vLLM-Omni runtime reports its stock layout
    replicated, the one baseline inside its space)."""

    name: str
    table: CostTable
    space: Space
    baselines: list[Space] | None
    ideal_table: CostTable

    def targets_space(self) -> str:
        """Where :func:`omniplane.slo.resolve.space_targets` resolves isolated deployments (the
        plan's ``meta.runtime``)."""
        return targets_space(self.name, self.space)


def targets_space(name: str, space: Space) -> str:
    """The space runtime ``name``'s targets are resolved in, in words (plans' and capacity's meta)."""
    if space.full:
        return f"{name} (Algorithm 1's whole space)"
    return f"{name} ({space.name}: whole stages as the runtime loads them)"


def setup(name: str, problem: Problem, cost: CostModel, ideal_table: CostTable, k_s: int,
          seed: int = 0) -> Setup:
    """The runtime ``name``'s :class:`Setup` (``ideal_table``: the ideal space's, whose parts a
    runtime table shares); :class:`RuntimeUnavailable` for vllm-omni on a model without a layout."""
    if name == "ideal":
        return Setup(name, ideal_table, FULL, None, ideal_table)
    if name != "vllm-omni":
        raise RuntimeUnavailable(f"--runtime: expected one of {', '.join(RUNTIMES)}, got {name!r}")
    model = problem.model
    fit = stage_fit(model, problem.workload, problem.mix, seed)
    table = CostTable(problem, cost, fit=fit, parts_of=ideal_table)
    space = runtime_space(model, k_s, fits=lambda n: bool(table.node(n).options))
    stock = vllm_omni(model)
    return Setup(name, table, space, [stock] if stock is not None else [], ideal_table)
