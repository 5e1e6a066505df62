"""Build a runnable topology from a physical plan and a cost model."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from omniplane.policy import Policy
from omniplane.sim.costs import CostSource
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.engines import DiTEngine, EncoderEngine, Engine, VAEEngine, VocoderEngine
from omniplane.sim.executor import Executor
from omniplane.sim.gpu import DEDICATED, GPUSlot
from omniplane.sim.job import Job, JobQueue
from omniplane.sim.llm import DEFAULT_TOKEN_BUDGET, LLMEngine
from omniplane.sim.metrics import ExecutorStats
from omniplane.sim.topology import Group, Node, Topology
from omniplane.spec import ComponentKind, GeneratorKind, ModelSpec, PlanSpec
from omniplane.spec.gpu import GPUKind

CfgFactory = Callable[[GPUKind, int, int], Any]
DEFAULT_FRAME_S = 0.08  # assumption: one 12.5 Hz codec frame when a vocoder states no frame rate


def default_cfg(gpu: GPUKind, tp: int, max_batch: int) -> Any:
    from omniplane.perf import ExecutorConfig

    return ExecutorConfig(gpu=gpu, tp=tp, max_batch=max_batch)


def build_topology(
    model: ModelSpec,
    plan: PlanSpec,
    gpu: GPUKind,
    cost: CostSource,
    loop: EventLoop,
    *,
    make_cfg: CfgFactory = default_cfg,
    policy_for: Callable[[str, str], Policy | None] | None = None,
    gpu_for: Mapping[str, GPUSlot] | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    trace: bool = False,
) -> Topology:
    """One executor per plan executor; engines per hosted component; routing from the plan.

    ``policy_for(executor_name, component)`` may return a scheduling policy for an LLM engine;
    ``gpu_for[executor_name]`` puts executors on a shared GPU (default: dedicated GPUs).
    Executor names are ``node/group.index`` (e.g. ``thinker/0.2``).
    """
    nodes: dict[str, Node] = {}
    executors: list[Executor] = []
    for pnode in plan.nodes:
        comps = tuple(model.ordered(pnode.components))
        groups = []
        for gi, g in enumerate(pnode.executors):
            shared: dict[str, deque[Job]] = {c: deque() for c in comps} if len(comps) == 1 else {}
            members = []
            for k in range(g.count):
                name = f"{pnode.name}/{gi}.{k}"
                cfg = make_cfg(gpu, g.tp, g.max_batch)
                engines = _engines(model, comps, cfg, g.max_batch, cost, shared, token_budget,
                                   name, policy_for)
                slot = (gpu_for or {}).get(name, DEDICATED)
                ex = Executor(name, pnode.name, engines, loop, slot, ExecutorStats(name, trace))
                members.append(ex)
                executors.append(ex)
            groups.append(Group(members, shared[comps[0]] if shared else None))
        cum = {t: list(np.cumsum(pnode.group_probs(t))) for t in model.type_names}
        nodes[pnode.name] = Node(pnode.name, comps, groups, cum)
    routes: dict[str, tuple[list[float], list[dict[str, str]]]] = {}
    for t, rlist in plan.routes.items():
        path = model.path_of(t)
        maps = []
        for r in rlist:
            where = {c: n for n in r.nodes for c in plan.node(n).components if c in path}
            maps.append(where)
        routes[t] = (list(np.cumsum([r.p for r in rlist])), maps)
    return Topology(nodes, routes, plan.transfer_ms / 1e3, executors)


def _engines(
    model: ModelSpec,
    comps: tuple[str, ...],
    cfg: Any,
    max_batch: int,
    cost: CostSource,
    shared: dict[str, deque[Job]],
    token_budget: int,
    name: str,
    policy_for: Callable[[str, str], Policy | None] | None,
) -> list[Engine]:
    llms = [c for c in comps if model.component(c).is_llm]
    kv_total = cost.kv_capacity_tokens(list(comps), cfg) if llms else 0
    engines: list[Engine] = []
    for c in comps:
        comp = model.component(c)
        queue = JobQueue(shared.get(c))
        args = (c, queue, cost, cfg, max_batch)
        if comp.kind is ComponentKind.LLM:
            policy = policy_for(name, c) if policy_for else None
            # kv_capacity_tokens is per LLM: the footprint already shares the free memory so
            # that every co-hosted LLM holds that many tokens (omniplane.perf.memory.footprint)
            engines.append(LLMEngine(*args, kv_capacity=kv_total,
                                     token_budget=token_budget, policy=policy))
        elif comp.kind is ComponentKind.ENCODER:
            engines.append(EncoderEngine(*args))
        elif comp.generator is GeneratorKind.DIT:
            engines.append(DiTEngine(*args))
        elif comp.generator is GeneratorKind.VAE:
            engines.append(VAEEngine(*args))
        else:
            rate = comp.size.frame_rate_hz
            engines.append(VocoderEngine(*args, frame_seconds=1.0 / rate if rate else DEFAULT_FRAME_S))
    return engines
