"""``omniplane export --target vllm-omni``: a realisable plan as vLLM-Omni 0.30 deploy files,
launch scripts per host, a host placement and the router's routing file.

Per deployment (:mod:`omniplane.deploy.topology`) one deploy YAML ``<dep>.yaml`` (vLLM-Omni's
``--deploy-config`` schema; the catalog's stock file with the plan's stages set):

- per stage ``num_replicas`` (the node's executors), ``tensor_parallel_size``, ``max_num_seqs``
  (the max batch), ``devices`` and ``gpu_memory_utilization`` sized from what the stage loads on
  the plan's GPU with the stages sharing its GPUs, KV at the contexts of the workload the plan was
  evaluated under (``prediction.workload``; else the model's catalog workload)
  (:func:`omniplane.perf.stage_memory.size_device`; a device whose stages do not fit is refused
  with the numbers);
- ``devices`` are logical indices into the GPUs ``CUDA_VISIBLE_DEVICES`` gives the process (how
  vLLM-Omni reads them, ``vllm_omni/entrypoints/stage_utils.py`` ``set_stage_devices``): on one
  host, the deployment's GPUs there (the launch script sets ``CUDA_VISIBLE_DEVICES`` to their
  host-local indices) in vLLM-Omni's pool mode (``num_replicas x TP`` entries); across hosts,
  the per-replica template ``0..TP-1`` (``split_devices_for_replicas``' template mode) and one
  ``CUDA_VISIBLE_DEVICES`` per process;
- connectors: an edge whose stages all run on one host keeps the stock connector (shared memory);
  an edge across hosts goes over Mooncake (``MooncakeTransferEngineConnector``, TCP);
- where the first stage (the thinker) shares its GPUs with later stages (or a node sets
  ``policy``), omniplane's scheduler (:func:`omniplane.vllm.stage_config.omniplane_config`) with
  HorizonServe's defaults for the GPU (:mod:`omniplane.vllm.deploy_defaults`: SM ladder, derived
  SLO table); otherwise vLLM-Omni's own (later stages sharing a GPU, e.g. talker + code2wav,
  are then separate processes time-sliced on it, as in vLLM-Omni's stock files).

Launch (read from ``vllm_omni/entrypoints/cli/serve.py`` and ``engine/stage_runtime.py``): a
deployment on one host is one process, ``vllm serve MODEL --omni --deploy-config FILE --port P``,
all stages local. A deployment across hosts runs vLLM-Omni's distributed mode: the head
``vllm serve MODEL --omni --deploy-config FILE --port P --stage-id S --omni-master-address A
--omni-master-port M --omni-dp-size-local N --omni-lb-policy L`` runs the API server and stage S
(N local replicas; it waits for ``num_replicas`` of every other stage to register), and every
other (stage, host) pair is ``vllm serve MODEL --omni --deploy-config FILE --headless --stage-id
S --omni-master-address A --omni-master-port M --omni-dp-size-local N``. ``--omni-lb-policy``
(random, round-robin, least-queue-length) is read by the head in distributed mode only.

Keys (``key_env``, ``export --upstream-key-env NAME``): the routing file names ``NAME`` as each
deployment's ``api_key_env`` and every API server gets the key as ``VLLM_API_KEY`` in its
environment, never on a command line or in a file. vLLM 0.30 requires a Bearer token on ``/v1``
when ``--api-key`` is absent and ``VLLM_API_KEY`` is set (``vllm/entrypoints/serve/middleware/
register.py``, ``init_entrypoints_middleware``: ``args.api_key or [envs.VLLM_API_KEY]``; ``/health``
stays open, ``authenticate.py`` ``GUARDED_PREFIX``); vLLM-Omni's API server builds vLLM's app
(``vllm_omni/entrypoints/openai/api_server.py``, ``build_openai_app``), so the same holds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from omniplane.deploy.export_text import (
    Process,
    check_key_env,
    cvd,
    host_var,
    launch_script,
    placement_yaml,
    readme,
)
from omniplane.deploy.placement import HEURISTIC, Hosts, Placement, place_kinds
from omniplane.deploy.routing_file import KIND, Endpoint, RoutingFile, Share
from omniplane.deploy.topology import Deployment, deployments, plan_layout
from omniplane.spec import ResolvedPlan, load_gpus
from omniplane.spec.layout import VllmOmniLayout

API_PORT = 8001  # deployment i serves on API_PORT + i (the router takes 8000)
MASTER_PORT = 25001  # deployment i's omni master (distributed mode) on MASTER_PORT + i
MOONCAKE = "mooncake_connector"
MOONCAKE_SPEC = {  # vllm_omni/deploy/bagel.yaml's rdma_connector, over TCP (RDMA: protocol rdma)
    "name": "MooncakeTransferEngineConnector",
    "extra": {"host": "auto", "zmq_port": 50051, "protocol": "tcp", "memory_pool_size": 4294967296,
              "memory_pool_device": "cpu"},
}
LB_POLICIES = ("random", "round-robin", "least-queue-length")  # vllm_omni LoadBalancingPolicy
SCHEDULED_POLICY = "horizon"  # where stages share a GPU and no node names a policy


@dataclass
class OmniExport:
    """What ``export --target vllm-omni`` writes: file name -> text, plus the parts."""

    deployments: list[Deployment]
    placement: Placement
    routing: RoutingFile
    configs: dict[str, dict[str, Any]]  # deployment -> deploy document (with the omniplane block)
    lb_policy: str = "random"
    files: dict[str, str] = field(default_factory=dict)
    key_env: str | None = None  # the variable holding the deployments' API key (module docstring)


def _lb_policy(plan: ResolvedPlan) -> str:
    v = plan.spec.meta.get("omni_lb_policy", "random")
    v = str(v).replace("_", "-").replace("least-queue", "least-queue-length").replace(
        "length-length", "length")
    if v not in LB_POLICIES:
        raise ValueError(f"plan meta.omni_lb_policy: {v!r} is not one of {', '.join(LB_POLICIES)}")
    return v


_DEFAULTS: dict[tuple[str, str], tuple[Any, dict[str, Any]]] = {}


def _horizon_defaults(plan: ResolvedPlan) -> tuple[Any, dict[str, Any]]:
    """(SLO table, ladder) of HorizonServe for the plan's model and GPU (cached)."""
    key = (plan.model.name, plan.gpu.name)
    if key not in _DEFAULTS:
        from omniplane.perf import CostModel
        from omniplane.vllm.deploy_defaults import model_ladder, solo_slo_table
        from omniplane.vllm.settings import load_slo_table

        cost = CostModel(plan.model)
        lad, source = model_ladder(plan.model, plan.gpu, cost=cost)
        table = load_slo_table(solo_slo_table(plan.model, plan.gpu, cost=cost))
        _DEFAULTS[key] = (table, {"levels": list(lad.levels), "source": source})
    return _DEFAULTS[key]


def _policy(plan: ResolvedPlan, dep: Deployment) -> str | None:
    named = [p for p in (plan.spec.node(n).policy for n in dep.nodes) if p is not None]
    if len(set(named)) > 1:
        raise ValueError(f"deployment {dep.name}: nodes name different policies {sorted(set(named))}; "
                         "vLLM-Omni runs one scheduler pipeline per deployment")
    if named:
        return named[0]
    return SCHEDULED_POLICY if dep.groups[0].shares_gpu else None


def deployment_config(plan: ResolvedPlan, layout: VllmOmniLayout, dep: Deployment, placement: Placement,
                      ctx: tuple[dict[str, Any], str]) -> dict[str, Any]:
    """The deploy document of one deployment (module docstring), with an ``omniplane`` block."""
    from omniplane.perf.stage_memory import StageMemoryError, render, size_device
    from omniplane.vllm.stage_config import omniplane_config

    hosts = placement.hosts_of(dep.name)
    multi = len(hosts) > 1
    deploy = copy.deepcopy(layout.deploy)
    by_id = {d["stage_id"]: d for d in deploy.setdefault("stages", [])}
    for st in layout.stages:
        by_id.setdefault(st.stage_id, {"stage_id": st.stage_id})
    notes: list[str] = []
    for g in dep.groups:
        if multi:
            devices = ",".join(str(i) for i in range(g.tp))
        else:
            local = {p: i for i, p in enumerate(placement.gpus_on(dep.name, hosts[0]))}
            devices = ",".join(str(local[p]) for e in placement.of(dep.name, g.node) for p in e.gpus)
        for sid in g.stage_ids:
            by_id[sid].update(num_replicas=g.count, devices=devices, tensor_parallel_size=g.tp,
                              max_num_seqs=g.max_batch)
    crossing = False
    for st in layout.stages:
        for src in st.input_sources:
            a, b = dep.group_of(src), dep.group_of(st.stage_id)
            if a.node == b.node and len(placement.hosts_of(dep.name, a.node)) == 1:
                continue
            if placement.edge_in_host(dep.name, a.node, b.node):
                continue
            crossing = True
            by_id[st.stage_id].setdefault("input_connectors", {})[f"from_stage_{src}"] = MOONCAKE
            by_id[src].setdefault("output_connectors", {})[f"to_stage_{st.stage_id}"] = MOONCAKE
            notes.append(f"edge {src} -> {st.stage_id} crosses hosts: Mooncake over TCP (set protocol: rdma "
                         "where the hosts have RDMA)")
    if crossing:
        deploy.setdefault("connectors", {})[MOONCAKE] = copy.deepcopy(MOONCAKE_SPEC)
    deploy["stages"] = [by_id[i] for i in sorted(by_id)]
    policy = _policy(plan, dep)
    if policy is not None:
        table, ladder = _horizon_defaults(plan)
        deploy = omniplane_config(layout, deploy, table, policy=policy, gpu=plan.gpu, ladder=ladder,
                                  control=f"omniplane-{dep.name}", single_gpu=False)
        notes.append(f"omniplane's scheduler, policy {policy} "
                     + ("(the plan's)" if policy != SCHEDULED_POLICY or not dep.groups[0].shares_gpu
                        else "(the first stage shares its GPUs with the next: HorizonServe's SM partitions)"))
    elif any(g.shares_gpu for g in dep.groups):
        notes.append("stages sharing a GPU here run as separate processes under vLLM-Omni's own schedulers "
                     "(time-sliced): omniplane's horizon partitions SMs between the first stage and the "
                     "stages sharing its GPUs, and the first stage shares none")
        if multi:
            notes.append("the scheduler's control segment is per host: stages on other hosts than the "
                         "first stage run without its coordination")
    entries = {d["stage_id"]: d for d in deploy["stages"]}
    sized = {}
    contexts, wl_name = ctx
    for g in dep.groups:
        group = [entries[s] for s in g.stage_ids]
        try:
            dev = size_device(plan.model, layout, group, load_gpus().get(g.gpu) if g.gpu else plan.gpu,
                              contexts)
        except StageMemoryError as exc:
            raise StageMemoryError(f"deployment {dep.name}, plan node {g.node!r} (TP {g.tp}, max batch "
                                   f"{g.max_batch}): {exc}") from None
        for d, s in zip(group, dev.stages, strict=True):
            d["gpu_memory_utilization"] = s.utilization
        on = f" {g.gpu}" if g.gpu else ""
        sized[f"{dep.name} {g.node} (each of its {g.count} x TP{g.tp}{on} GPUs)"] = dev
    deploy["omniplane"] = {
        "plan": plan.spec.name,
        "deployment": dep.name,
        "nodes": list(dep.nodes),
        "hosts": hosts,
        "model": layout.hf_id,
        "source": f"vLLM-Omni {layout.vllm_omni}: {layout.source}",
        "devices": ("per-replica template 0..TP-1 of each process's CUDA_VISIBLE_DEVICES (distributed mode)"
                    if multi else "indices into CUDA_VISIBLE_DEVICES="
                    f"{cvd(placement.gpus_on(dep.name, hosts[0]))} on {hosts[0]}"),
        "notes": notes,
        "memory_contexts": f"KV sized for the context lengths of workload {wl_name}",
        "memory": {k: m.to_json() for k, m in sized.items()},
        "memory_table": render(sized),
    }
    return deploy


def loader_document(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "omniplane"}


def dump_deploy(doc: dict[str, Any]) -> str:
    meta = doc["omniplane"]
    head = "".join(f"# {k}: {v}\n" for k, v in meta.items() if k not in ("memory", "memory_table", "notes"))
    head += "".join(f"# note: {n}\n" for n in meta.get("notes", []))
    head += "".join(f"# {line}\n" for line in meta.get("memory_table", "").splitlines())
    return head + yaml.safe_dump(loader_document(doc), sort_keys=False, default_flow_style=None, width=110)


def processes(dep: Deployment, index: int, placement: Placement, lb: str) -> list[Process]:
    """The ``vllm serve`` processes of deployment ``dep`` (module docstring)."""
    hosts = placement.hosts_of(dep.name)
    port, master = API_PORT + index, MASTER_PORT + index
    base = ["serve", "@MODEL", "--omni", "--deploy-config", f"@CONFIG_DIR/{dep.name}.yaml"]
    api = ["--host", '"$BIND_HOST"', "--port", str(port)]
    if len(hosts) == 1:
        return [Process(dep.name, hosts[0], None, True, 1, tuple(placement.gpus_on(dep.name, hosts[0])),
                        tuple(base + api))]
    head_host = placement.of(dep.name, dep.groups[0].node)[0].host
    addr = f'"${host_var(head_host)}"'
    out = []
    for g in dep.groups:
        for sid in g.stage_ids:
            for h in placement.hosts_of(dep.name, g.node):
                mine = [e for e in placement.of(dep.name, g.node) if e.host == h]
                gpus = tuple(p for e in mine for p in e.gpus)
                head = g is dep.groups[0] and sid == g.stage_ids[0] and h == head_host
                dist = ["--stage-id", str(sid), "--omni-master-address", addr, "--omni-master-port",
                        str(master), "--omni-dp-size-local", str(len(mine))]
                argv = base + (api + dist + ["--omni-lb-policy", lb] if head else ["--headless", *dist])
                out.append(Process(dep.name, h, sid, head, len(mine), gpus, tuple(argv)))
    return sorted(out, key=lambda p: not p.head)


def routing(plan: ResolvedPlan, layout: VllmOmniLayout, deps: list[Deployment], placement: Placement,
            *, serve: bool = False, key_env: str | None = None) -> RoutingFile:
    """The routing file (:mod:`omniplane.deploy.routing_file`): per type the plan's route
    probabilities summed per deployment; endpoints are URLs on the head hosts, or (``serve``)
    the Serve applications named after the deployments."""
    of = {n: d.name for d in deps for n in d.nodes}
    types: dict[str, list[Share]] = {}
    for t, routes in plan.spec.routes.items():
        p: dict[str, float] = {}
        for r in routes:
            d = of[r.nodes[0]]
            p[d] = p.get(d, 0.0) + r.p
        types[t] = [Share(deployment=d, p=round(v, 12)) for d, v in p.items() if v > 0]
    eps = {}
    for i, dep in enumerate(deps):
        head = placement.of(dep.name, dep.groups[0].node)[0].host
        where = {"serve_app": dep.name} if serve else {"url": f"http://{head}:{API_PORT + i}"}
        eps[dep.name] = Endpoint(gpus=dep.gpus, nodes=list(dep.nodes), api_key_env=key_env, **where)
    slo = dict(plan.spec.slo.targets_ms) if plan.spec.slo is not None else {}
    return RoutingFile(kind=KIND, plan=plan.spec.name, model=plan.model.name, served_model=layout.hf_id,
                       deployments=eps, types=types, slo_ms=slo)


def _workload_ref(plan: ResolvedPlan) -> str | None:
    """The workload the plan was evaluated under (KV is sized for its contexts); None: the model's
    catalog workload."""
    from omniplane.spec import find_catalog_workload

    if plan.spec.prediction is None:
        return None
    ref = plan.spec.prediction.workload
    if find_catalog_workload(ref) is None and plan.path is not None and not Path(ref).is_absolute():
        return str(plan.path.parent / ref)
    return ref


def export_vllm_omni(plan: ResolvedPlan, hosts: Hosts, *, serve: bool = False,
                     key_env: str | None = None) -> OmniExport:
    """Everything ``export --target vllm-omni`` writes (module docstring); ``key_env``: the
    environment variable holding the deployments' API key (None: no key). Raises
    :class:`omniplane.deploy.topology.NotRealisable`, :class:`~omniplane.deploy.placement.PlacementError`
    or :class:`~omniplane.perf.stage_memory.StageMemoryError` (all ValueErrors)."""
    from omniplane.vllm.stage_config import workload_contexts

    if key_env is not None:
        check_key_env(key_env)
    layout = plan_layout(plan)
    deps = deployments(plan)
    placement = place_kinds(deps, hosts)
    lb = _lb_policy(plan)
    ctx = workload_contexts(plan.model, _workload_ref(plan))
    configs = {d.name: deployment_config(plan, layout, d, placement, ctx) for d in deps}
    route = routing(plan, layout, deps, placement, serve=serve, key_env=key_env)
    procs = [p for i, d in enumerate(deps) for p in processes(d, i, placement, lb)]
    files = {f"{d}.yaml": dump_deploy(doc) for d, doc in configs.items()}
    files["routing.yaml"] = routing_text(route)
    files["placement.yaml"] = placement_yaml(plan, deps, placement)
    for h in placement.hosts:
        mine = [p for p in procs if p.host == h]
        if mine:
            files[f"launch-{h}.sh"] = launch_script(h, mine, layout.hf_id, procs, key_env)
    files["README.md"] = readme(plan, layout, deps, placement, procs, lb, HEURISTIC, key_env)
    return OmniExport(deps, placement, route, configs, lb, files, key_env)


def routing_text(route: RoutingFile) -> str:
    head = ("# omniplane routing file (omniplane.deploy.routing_file): per request type, the vLLM-Omni\n"
            "# deployments serving it and their probabilities; read by the router\n"
            "# (omniplane.deploy.gateway)\n")
    return head + yaml.safe_dump(route.model_dump(mode="json", exclude_none=True), sort_keys=False,
                                 default_flow_style=None, width=110)
