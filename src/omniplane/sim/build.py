"""Build a runnable topology from a physical plan, a cost model and a run's setup.

Everything about how a plan becomes executors is decided here, at construction: the run's
:class:`RunSetup` carries the scheduling policy per LLM engine, the token budget, a cap on
every LLM's running sequences (vLLM's ``max_num_seqs``), GPU sharing between executors
(:class:`omniplane.sim.colocate.SharedGPU`; a plan node's stages as processes on one GPU,
:mod:`omniplane.sim.processes`), CPU preprocessing times, whether decode spans are
used, and whether steps are traced. Nothing is changed on a topology after it is built.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from omniplane.policy import Policy
from omniplane.sim import processes
from omniplane.sim.colocate import SharedGPU, share
from omniplane.sim.costs import CostSource, PriceBook
from omniplane.sim.engines import DiTEngine, EncoderEngine, Engine, VAEEngine, VocoderEngine
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.executor import Executor
from omniplane.sim.job import Job, JobQueue
from omniplane.sim.llm import DEFAULT_TOKEN_BUDGET, LLMEngine
from omniplane.sim.stats import ExecutorStats
from omniplane.sim.topology import Group, Node, Topology
from omniplane.spec import ComponentKind, GeneratorKind, ModelSpec, PlanSpec
from omniplane.spec.gpu import GPUKind

CfgFactory = Callable[[GPUKind | None, int, int], Any]
PolicyFor = Callable[[str, str], Policy | None]
DEFAULT_FRAME_S = 0.08  # assumption: one 12.5 Hz codec frame when a vocoder states no frame rate


def default_cfg(gpu: GPUKind | None, tp: int, max_batch: int) -> Any:
    from omniplane.perf import ExecutorConfig

    if gpu is None:
        raise ValueError("a plan run without a GPU kind needs RunSetup.make_cfg for its executor configs")
    return ExecutorConfig(gpu=gpu, tp=tp, max_batch=max_batch)


@dataclass(frozen=True)
class RunSetup:
    """How a plan is turned into executors for one run (beyond the plan itself).

    ``policy_for(executor_name, component)`` may return a scheduling policy for an LLM engine
    (default FCFS). ``max_seqs`` caps every LLM engine's running sequences (vLLM's
    ``max_num_seqs``; None: the plan's ``max_batch``). ``shared_gpu`` co-locates executors on one
    GPU. ``cpu_seconds(component)`` is CPU preprocessing per input item (default: the model's
    executor types). ``spans=False`` simulates every decode iteration as its own event (for the
    span-equivalence check). ``prices`` keeps step prices across runs priced by its cost source
    (exact; the planner's many runs). Executor names are ``node/group.index`` (e.g. ``thinker/0.2``).
    """

    policy_for: PolicyFor | None = None
    token_budget: int = DEFAULT_TOKEN_BUDGET
    max_seqs: int | None = None
    shared_gpu: SharedGPU | None = None
    cpu_seconds: Callable[[str], float] | None = None
    make_cfg: CfgFactory = default_cfg
    spans: bool = True
    trace: bool = False
    prices: PriceBook | None = None

    def __post_init__(self) -> None:
        if self.max_seqs is not None and self.max_seqs < 1:
            raise ValueError(f"max_seqs must be >= 1, got {self.max_seqs}")
        if self.token_budget < 1:
            raise ValueError(f"token_budget must be >= 1, got {self.token_budget}")


def build_topology(model: ModelSpec, plan: PlanSpec, gpu: GPUKind | None, cost: CostSource, loop: EventLoop,
                   setup: RunSetup | None = None) -> Topology:
    """One executor per plan executor; engines per hosted component; routing from the plan.
    ``gpu`` None (an engine with no GPU kind) needs ``setup.make_cfg`` and a model without a
    KV-cache edge (its transfer time is the GPU kind's link bandwidth's)."""
    setup = setup or RunSetup()
    cpu = setup.cpu_seconds or model.cpu_seconds_per_item
    kinds = _group_kinds(plan, gpu)
    nodes: dict[str, Node] = {}
    executors: list[Executor] = []
    for pnode in plan.nodes:
        comps = tuple(model.ordered(pnode.components))
        stage_of = _stages(model, comps) if pnode.sharing is not None else None
        groups = []
        for gi, g in enumerate(pnode.executors):
            shared: dict[str, deque[Job]] = {c: deque() for c in comps} if len(comps) == 1 else {}
            members: list[Any] = []
            for k in range(g.count):
                name = f"{pnode.name}/{gi}.{k}"
                cfg = setup.make_cfg(kinds.get(g.gpu or "", gpu), g.tp, g.max_batch)
                engines = _engines(model, comps, cfg, g.max_batch, cost, shared, name, setup, cpu)

                def make(n: str, engs: list[Engine], node: str = pnode.name) -> Executor:
                    return Executor(n, node, engs, loop, ExecutorStats(n, setup.trace), can_span=setup.spans)

                if stage_of is not None and pnode.sharing is not None:  # stage processes on one GPU
                    seat, procs = processes.split(name, pnode.name, engines, stage_of, pnode.sharing, cfg,
                                                  cost, make)
                    members.append(seat)
                    executors.extend(procs)
                    continue
                ex = make(name, engines)
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
    if setup.shared_gpu is not None:
        share(executors, setup.shared_gpu, cost)
    # prefill/decode disaggregation: the prefill phase's KV cache crosses the GPU link
    kv = [c for c in model.components for e in c.edges if e.kv]
    if kv and gpu is None:
        raise ValueError(f"{model.name}: {kv[0].name}'s KV-cache edge needs a GPU kind (its link bandwidth)")
    kv_s = {c.name: c.size.kv_bytes_per_token() / gpu.link_bw for c in kv} if gpu is not None else {}
    edges = edge_costs(model, plan, gpu, kinds)
    return Topology(nodes, routes, plan.transfer_ms / 1e3, executors, kv_s, edges)


def edge_costs(model: ModelSpec, plan: PlanSpec, gpu: GPUKind | None, kinds: dict[str, GPUKind]
               ) -> dict[tuple[str, str, str, str], tuple[float, float, tuple[str, ...]]]:
    """``Topology.edge_cost`` of a plan whose executor groups name their GPU kinds (``kinds``;
    empty: none, the plan's fixed ``transfer_ms`` alone). A node is on its first group's kind.
    Its executors go onto hosts of their kind of the plan's ``meta.inventory.host_gpus`` GPUs
    (else the kind's ``gpus_per_node``) by omniplane.perf.hosts.place_kinds (the export's
    placement); an edge is within a host when every replica of both ends is on one host."""
    from omniplane.perf.hosts import Pipeline, PlacementError, Stage, pipeline_order, place_kinds
    from omniplane.perf.links import edge_bytes, link

    if not kinds or gpu is None:
        return {}
    inv = plan.meta.get("inventory") if isinstance(plan.meta, dict) else None
    host = inv.get("host_gpus") if isinstance(inv, dict) else None
    topo = model.ordered(c.name for c in model.components)
    ordered = [plan.nodes[i] for i in pipeline_order(topo, [n.components for n in plan.nodes])]
    of = [(n, g, kinds.get(g.gpu or "", gpu)) for n in ordered for g in n.executors]
    stages = tuple(Stage(n.name, g.count, g.tp, k.name) for n, g, k in of)
    sizes = {k.name: int(host or k.gpus_per_node) for _, _, k in of}
    try:
        hosts = place_kinds([Pipeline(plan.name, stages)], sizes)
    except PlacementError as exc:
        raise ValueError(f"plan {plan.name}: hosts of {host or 'the kind'}'s GPUs: {exc}") from None
    on = {n.name: kinds.get(n.executors[0].gpu or "", gpu) for n in plan.nodes}
    out: dict[tuple[str, str, str, str], tuple[float, float, tuple[str, ...]]] = {}
    for a in plan.nodes:
        for b in plan.nodes:
            if a.name == b.name:
                continue
            ka, kb = on[a.name], on[b.name]
            lk = link(ka, kb, ka.name == kb.name and hosts.in_host(plan.name, a.name, b.name))
            for frm in a.components:
                for e in model.component(frm).edges:
                    if e.to in b.components and not e.kv:  # a KV handover: kv_seconds_per_token
                        eb = edge_bytes(model, frm, e.to)
                        out[frm, e.to, a.name, b.name] = (lk.latency, eb.per_unit / lk.bandwidth, eb.fields)
    return out


def _group_kinds(plan: PlanSpec, gpu: GPUKind | None) -> dict[str, GPUKind]:
    """The catalog kind of each executor group's own ``gpu`` (a mixed fleet: each group is
    priced on its kind); empty when no group names one, or the run has no GPU kind."""
    named = {g.gpu for n in plan.nodes for g in n.executors if g.gpu is not None}
    if not named or gpu is None:
        return {}
    from omniplane.spec.load import load_gpus

    catalog = load_gpus()
    return {k: catalog.get(k) for k in named}


def _stages(model: ModelSpec, comps: tuple[str, ...]) -> dict[str, int] | None:
    """vLLM-Omni stage of each component (its catalog layout); None when the node is one stage
    or the model has no layout (its components then take turns in one executor)."""
    from omniplane.spec.load import load_layout

    layout = load_layout(model.name)
    if layout is None:
        return None
    out = {c: layout.stage_of(c).stage_id for c in comps}
    return out if len(set(out.values())) > 1 else None


def _engines(model: ModelSpec, comps: tuple[str, ...], cfg: Any, max_batch: int, cost: CostSource,
             shared: dict[str, deque[Job]], name: str, setup: RunSetup,
             cpu: Callable[[str], float]) -> list[Engine]:
    llms = [c for c in comps if model.component(c).is_llm]
    book = setup.prices if setup.prices is not None and setup.prices.cost is cost else None
    kv_total = (book or cost).kv_capacity_tokens(list(comps), cfg) if llms else 0
    decode_only = {e.to for c in model.components for e in c.edges if e.kv}
    engines: list[Engine] = []
    for c in comps:
        comp = model.component(c)
        queue = JobQueue(shared.get(c))
        if comp.kind is ComponentKind.LLM:
            policy = setup.policy_for(name, c) if setup.policy_for else None
            # kv_capacity_tokens is per LLM: the footprint already shares the free memory so
            # that every co-hosted LLM holds that many tokens (omniplane.perf.memory.footprint)
            engines.append(LLMEngine(c, queue, cost, cfg, setup.max_seqs or max_batch, kv_capacity=kv_total,
                                     token_budget=setup.token_budget, policy=policy,
                                     kv_loaded=c in decode_only))
            continue
        args = (c, queue, cost, cfg, max_batch)
        if comp.kind is ComponentKind.ENCODER:
            # inside an LLM's engine process the encoder's step is bounded by vLLM's encoder budget
            engines.append(EncoderEngine(*args, cpu_seconds=cpu(c),
                                         token_budget=setup.token_budget if llms else None))
        elif comp.generator is GeneratorKind.DIT:
            engines.append(DiTEngine(*args))
        elif comp.generator is GeneratorKind.VAE:
            engines.append(VAEEngine(*args))
        else:
            rate = comp.size.frame_rate_hz
            engines.append(VocoderEngine(*args, frame_seconds=1.0 / rate if rate else DEFAULT_FRAME_S))
    if book is not None:
        for e in engines:
            e.prices = book.table(e.comp, cfg)
    return engines
