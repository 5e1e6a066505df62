"""A plan's GPU memory as vLLM-Omni would load it (``omniplane plan``'s memory table).

Each executor group of each node becomes the vLLM-Omni stages its deploy file runs
(:func:`omniplane.deploy.vllm_omni.node_stage_config`), sized per GPU by
:mod:`omniplane.perf.stage_memory`: weights of every component a stage loads (the thinker stage
loads every encoder), the runtime reserve, KV tokens, and how many sequences of the workload's
mean and p95 context the KV cache holds against the max batch. A node whose stages do not fit
is listed with the reason. This is what is shown and emitted; the planner's own fit check
(:func:`omniplane.perf.memory.check_fits`) counts the plan's component split and is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omniplane.perf.stage_memory import TABLE_HEAD, Context, device_rows
from omniplane.spec import ResolvedPlan


def plan_memory(plan: ResolvedPlan, ctx: Mapping[str, Context], workload: str) -> dict[str, Any]:
    """``{"workload", "unit", "nodes": [{"node", "group", "tp", "max_batch", "devices" | "error"}]}``
    (no ``nodes`` and a ``note`` for a model vLLM-Omni has no layout of)."""
    from omniplane.deploy.vllm_omni import node_stage_config
    from omniplane.spec.load import load_layout

    out: dict[str, Any] = {"workload": workload, "unit": "GiB", "nodes": []}
    if load_layout(plan.model.name) is None:
        out["note"] = f"no vLLM-Omni layout for {plan.model.name}: memory as vLLM-Omni loads it not sized"
        return out
    for node in plan.spec.nodes:
        for gi, g in enumerate(node.executors):
            row: dict[str, Any] = {"node": node.name, "group": gi, "tp": g.tp, "max_batch": g.max_batch}
            try:
                doc = node_stage_config(plan, node.name, gi, remote=False, contexts=(dict(ctx), workload))
            except ValueError as exc:
                row["error"] = str(exc)
            else:
                row["devices"] = doc["omniplane"]["memory"]
            out["nodes"].append(row)
    return out


def render(mem: Mapping[str, Any]) -> str:
    """The memory table of :func:`plan_memory`'s document: per node group, a row per stage."""
    if "note" in mem:
        return str(mem["note"])
    lines = ["memory per GPU as vLLM-Omni loads the plan (GiB; fit: sequences of the mean and",
             "the p95 context the KV cache holds, against the max batch)", TABLE_HEAD]
    for row in mem["nodes"]:
        head = f"{row['node']}-g{row['group']} (tp {row['tp']})"
        if "error" in row:
            lines += [f"{head}: does not fit", f"  {row['error']}"]
            continue
        for dev in row["devices"].values():
            lines.append(f"{head}, {dev['gpu']} ({dev['capacity_gib']:.1f} GiB):")
            lines += device_rows(dev)
    lines.append(f"KV at the context lengths of workload {mem['workload']}")
    return "\n".join(lines)
