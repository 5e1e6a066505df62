"""vLLM-Omni deploy configs for each plan node.

vLLM-Omni runs a model as *stages* (thinker, talker, code2wav, DiT), a fixed pipeline topology
per model plus a deploy YAML of per-stage placement and limits (the catalog's stock layout,
:mod:`omniplane.spec.layout`). A plan node becomes one deploy YAML (vLLM-Omni 0.30 schema,
``--deploy-config``): the stock deploy file with the node's stages set from the plan: devices
``0..TP-1`` (Ray sets ``CUDA_VISIBLE_DEVICES`` per replica), ``tensor_parallel_size`` and
``max_num_seqs`` from the executor group, and each stage's ``gpu_memory_utilization`` sized from
what it loads on the plan's GPU (:mod:`omniplane.perf.stage_memory`: weights of every component
the stage loads, runtime reserve, KV for the max batch at the model's catalog workload's context;
a node whose stages do not fit is refused, naming the stage, the GPU and the numbers). A stage the
node does not run keeps the entry its own node gets (that node's devices and share). A node
whose ``policy`` is set runs omniplane's scheduler (the file names omniplane's pipeline variant
and carries the settings, :func:`omniplane.vllm.stage_config.omniplane_config`); otherwise
vLLM-Omni's own. Encoders run inside the thinker stage, as in vLLM-Omni; an encoder-only node is
the thinker stage as stock: vLLM-Omni 0.30's loader rejects a per-stage ``ec_transfer_config``
(vLLM's encoder-cache hand-over), so an encoder split in the plan is not realised (noted in the
file). Edges to stages on other nodes name a Mooncake connector (``input_connectors`` /
``output_connectors`` with the connector under top-level ``connectors``).

What runs these files is vLLM-Omni itself (``vllm serve MODEL --omni``, started by
:mod:`omniplane.deploy.omni_server` on Ray or by the export's launch scripts): the runtime
orchestrates its stages. The cross-node connector entries are unverified (no GPU and no Mooncake
here); the files say so in their header.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

from omniplane.spec import ComponentKind, ResolvedPlan
from omniplane.spec.layout import LayoutStage, VllmOmniLayout, layout_models
from omniplane.spec.load import load_layout

GPU_MEMORY_BUDGET = 0.9  # vLLM's default gpu_memory_utilization (scaling before the stages are sized)
CONNECTOR = "mooncake"
CONNECTOR_SPEC = {
    "name": "MooncakeTransferEngineConnector",
    "extra": {"host": "127.0.0.1", "protocol": "tcp"},
}


def _layout(plan: ResolvedPlan) -> VllmOmniLayout:
    layout = load_layout(plan.model.name)
    if layout is None:
        raise ValueError(
            f"no vLLM-Omni stage layout known for model {plan.model.name!r} "
            f"(catalog layouts: {', '.join(layout_models())}); use --engine emulated"
        )
    return layout


def _encoders(plan: ResolvedPlan, comps: list[str]) -> list[str]:
    return [c for c in comps if plan.model.component(c).kind is ComponentKind.ENCODER]


def node_stages(plan: ResolvedPlan, node: str) -> list[LayoutStage]:
    """The layout stages node ``node`` runs. A stage must be on one node whole, except that the
    thinker stage's encoders may run on their own nodes (encoder-only thinker stages)."""
    layout, comps = _layout(plan), set(plan.spec.node(node).components)
    out = []
    for st in layout.stages:
        here = [c for c in st.components if c in comps]
        if not here:
            continue
        missing = [c for c in st.components if c not in comps]
        if missing and _encoders(plan, missing) != missing and _encoders(plan, here) != here:
            raise ValueError(
                f"plan node {node!r} runs {here} of vLLM-Omni stage {st.model_stage!r} ({st.components}) "
                f"without {missing}; vLLM-Omni runs a stage whole (only encoders may be split off)"
            )
        out.append(st)
    return out


def _home(plan: ResolvedPlan, stage: LayoutStage, prefer: str | None = None) -> str:
    """The node running ``stage``'s model (for the thinker stage: the one with its LLM);
    ``prefer`` when it is one (a stage several nodes run is at home on each of them)."""
    nodes = sorted(plan.spec.nodes, key=lambda n: n.name != prefer)
    for n in nodes:
        mine = [c for c in stage.components if c in n.components]
        if mine and (len(mine) == len(stage.components) or any(plan.model.component(c).is_llm for c in mine)):
            return n.name
    raise ValueError(f"no plan node runs vLLM-Omni stage {stage.model_stage!r} ({stage.components})")


_CONTEXTS: dict[str, tuple[dict[str, Any], str]] = {}


def _contexts(plan: ResolvedPlan) -> tuple[dict[str, Any], str]:
    """Context lengths per LLM of the model's catalog workload (cached per model)."""
    from omniplane.vllm.stage_config import workload_contexts

    hit = _CONTEXTS.get(plan.model.name)
    if hit is None:
        hit = _CONTEXTS[plan.model.name] = workload_contexts(plan.model)
    return hit


def node_stage_config(
    plan: ResolvedPlan,
    node: str,
    group: int = 0,
    *,
    remote: bool = True,
    contexts: tuple[dict[str, Any], str] | None = None,
) -> dict[str, Any]:
    """The deploy document for one replica of executor group ``group`` of ``node`` (``remote``:
    also give the stages other nodes run the entries their nodes get; ``contexts``: the context
    lengths KV is sized for and their workload's name, default the model's catalog workload)."""
    from omniplane.perf.stage_memory import StageMemoryError, render
    from omniplane.vllm.settings import DEFAULT_CLASSES, SloTable
    from omniplane.vllm.stage_config import omniplane_config, size_memory

    layout, pnode = _layout(plan), plan.spec.node(node)
    g = pnode.executors[group]
    mine = node_stages(plan, node)
    deploy = copy.deepcopy(layout.deploy)
    by_id = {d["stage_id"]: d for d in deploy.setdefault("stages", [])}
    notes: list[str] = []
    for st in mine:
        d = by_id.setdefault(st.stage_id, {"stage_id": st.stage_id})
        d.update(
            devices=",".join(str(i) for i in range(g.tp)), tensor_parallel_size=g.tp, max_num_seqs=g.max_batch
        )
        home = _home(plan, st, node)
        for src in st.input_sources:
            if _home(plan, layout.stages[src], node) != node:
                d.setdefault("input_connectors", {})[f"from_stage_{src}"] = CONNECTOR
        for nxt in layout.stages:
            if st.stage_id in nxt.input_sources and _home(plan, nxt, node) != node:
                d.setdefault("output_connectors", {})[f"to_stage_{nxt.stage_id}"] = CONNECTOR
        if home != node:  # an encoder-only node
            notes.append(
                f"encoder-only node: the plan runs {sorted(set(st.components) & set(pnode.components))} "
                f"here for node {home}, but vLLM-Omni {layout.vllm_omni} runs encoders inside the "
                f"{st.model_stage} stage and its loader rejects a per-stage ec_transfer_config: this file is "
                "that stage as stock, and the split is not realised"
            )
        elif set(st.components) - set(pnode.components):
            notes.append(
                f"the plan runs {sorted(set(st.components) - set(pnode.components))} on other nodes; "
                f"vLLM-Omni {layout.vllm_omni} has no per-stage encoder hand-over, so this "
                f"{st.model_stage} stage still runs its own encoders"
            )
    deploy["stages"] = [by_id[i] for i in sorted(by_id)]
    if any(
        CONNECTOR in (d.get(k) or {}).values()
        for d in deploy["stages"]
        for k in ("input_connectors", "output_connectors")
    ):
        deploy.setdefault("connectors", {})[CONNECTOR] = copy.deepcopy(CONNECTOR_SPEC)
        notes.append("cross-node edges over the Mooncake connector; unverified")
    if pnode.policy is not None:
        table = SloTable(
            kind="omniplane-slo-table",
            source="assumption: classes only; SLOs from "
            "$OMNIPLANE_SLO_TABLE / OMNIPLANE_SLO_<CLASS> on the replica",
            classes=dict(DEFAULT_CLASSES),  # HorizonServe's classes (priorities 0 / 10 / 20)
        )
        deploy = omniplane_config(
            layout,
            deploy,
            table,
            policy=pnode.policy,
            gpu=plan.gpu,
            control=f"omniplane-{node}-g{group}",
            single_gpu=False,
            memory_budget=GPU_MEMORY_BUDGET,
        )
    ctx, wl_name = contexts or _contexts(plan)
    mine_ids = [st.stage_id for st in mine]
    try:
        sized = size_memory(deploy, layout, plan.model, plan.gpu, ctx, mine_ids)
    except StageMemoryError as exc:
        raise StageMemoryError(f"plan node {node!r} (executor group {group}): {exc}") from None
    if remote:
        for st in layout.stages:
            if st.stage_id in mine_ids:
                continue
            theirs, home = None, ""
            for n in plan.spec.nodes:  # the first node that runs the stage and fits
                if n.name == node or _home(plan, st, n.name) != n.name:
                    continue
                try:
                    theirs = node_stage_config(plan, n.name, remote=False, contexts=(ctx, wl_name))
                    home = n.name
                    break
                except ValueError:
                    continue
            if theirs is None:  # no node runs it, or none fits (that node's own file says why)
                notes.append(f"stage {st.stage_id} ({st.model_stage}): no other node that runs it fits; "
                             "its entry is the stock one")
                continue
            entry = next(d for d in theirs["stages"] if d["stage_id"] == st.stage_id)
            d = next(x for x in deploy["stages"] if x["stage_id"] == st.stage_id)
            for key in ("devices", "tensor_parallel_size", "max_num_seqs", "gpu_memory_utilization"):
                if key in entry:
                    d[key] = entry[key]
            notes.append(
                f"stage {st.stage_id} ({st.model_stage}) runs on node {home}: its entry is that node's "
                "(devices, TP, memory share), not a claim on this node's GPUs"
            )
    deploy["omniplane"] = {
        "plan": plan.spec.name,
        "node": node,
        "group": group,
        "model": layout.hf_id,
        "components": list(pnode.components),
        "stage_ids": [st.stage_id for st in mine],
        "source": f"vLLM-Omni {layout.vllm_omni}: {layout.source}",
        "notes": notes,
        "memory_contexts": f"KV sized for the context lengths of workload {wl_name}",
        "memory": {dev: m.to_json() for dev, m in sized.items()},
        "memory_table": render({f"{node}-g{group} devices {dev}": m for dev, m in sized.items()}),
    }
    return deploy


def loader_document(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as vLLM-Omni's loader takes it (omniplane's own block removed: the loader ignores
    unknown top-level keys, but the file stays one vLLM-Omni reads as its own)."""
    return {k: v for k, v in doc.items() if k != "omniplane"}


def write_stage_configs(plan: ResolvedPlan, out_dir: str | os.PathLike[str]) -> list[Path]:
    """One deploy YAML per executor group of every node: ``<node>-g<group>.yaml`` (omniplane's
    description of the node as a comment header)."""
    from omniplane.deploy.orchestrator import deployment_name

    docs = {  # every file sized before any is written: a node that does not fit writes nothing
        deployment_name(node.name, gi): _dump(node_stage_config(plan, node.name, gi))
        for node in plan.spec.nodes
        for gi in range(len(node.executors))
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in docs.items():
        p = out / f"{name}.yaml"
        p.write_text(text)
        paths.append(p)
    return paths


def _dump(doc: dict[str, Any]) -> str:
    meta = doc["omniplane"]
    head = "".join(f"# {k}: {v}\n" for k, v in meta.items() if k not in ("memory", "memory_table"))
    head += "".join(f"# {line}\n" for line in meta.get("memory_table", "").splitlines())
    return head + yaml.safe_dump(loader_document(doc), sort_keys=False, default_flow_style=None, width=110)
