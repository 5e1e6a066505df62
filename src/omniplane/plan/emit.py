"""Physical plan candidates as plan files (``PlanSpec``, docs/reference/spec.md) and back as text.

Node names are the hosted components joined by ``+`` in graph order, with ``.2``, ``.3`` for
further instances of the same set (side-by-side subplans). A node has one executor group, so
its executor-level routing is the default (all traffic to that group); path-level routing is
in ``routes``. Routes with probability 0 are left out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from omniplane.plan.flow import Candidates
from omniplane.plan.routing import node_share
from omniplane.spec import ModelSpec, PlanSpec, parse


def node_names(cands: Candidates) -> list[str]:
    names: list[str] = []
    seen: dict[str, int] = {}
    for nc in cands.costs:
        base = nc.name
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}.{seen[base]}")
    return names


def to_spec(cands: Candidates, i: int, model: ModelSpec, gpu: str, budget: int, transfer_ms: float,
            name: str = "", meta: dict[str, Any] | None = None) -> PlanSpec:
    """Candidate ``i`` of ``cands`` as a validated plan. An instance that is a second executor
    group of another (``LogicalPlan.group_of``) becomes that node's second ``executors`` entry,
    with the node's per-type ``routing`` between its groups."""
    names = node_names(cands)
    groups = cands.lp.group_of or tuple([-1] * len(cands.costs))
    owner = [n if g < 0 else g for n, g in enumerate(groups)]
    names = [names[o] for o in owner]
    p = cands.p[int(cands.vec[i])]
    share = node_share(cands.lp, p[None])[0]  # [m, T]
    nodes: dict[int, dict[str, Any]] = {}
    for n, nc in enumerate(cands.costs):
        tp, mb = nc.options[int(cands.opt[i, n])]
        group = {"count": int(cands.cnt[i, n]), "tp": int(tp), "max_batch": int(mb)}
        if groups[n] < 0:
            nodes[n] = {"name": names[n], "components": list(nc.comps), "executors": [group]}
        else:
            nodes[groups[n]]["executors"].append(group)
    for n, g in enumerate(groups):
        if g < 0:
            continue
        routing = {}
        for t, tn in enumerate(model.type_names):
            a, b = share[g, t], share[n, t]
            if a + b > 1e-12:
                routing[tn] = [round(float(a / (a + b)), 6), round(float(1 - a / (a + b)), 6)]
        nodes[g]["routing"] = routing
    order = {c: k for k, c in enumerate(model.topo_order)}

    def first(t: str, n: int) -> int:  # a route lists its nodes in the order type t reaches them
        path = model.request_type(t).path
        return min(order[c] for c in cands.costs[n].comps if c in path)

    routes: dict[str, list[dict[str, Any]]] = {}
    for t, rs in enumerate(cands.lp.routes):
        probs = np.array([p[t, r] for r in range(len(rs))])
        if probs.sum() <= 0:  # cannot happen for a covered type; keep the plan valid regardless
            probs = np.full(len(rs), 1.0 / len(rs))
        tn = model.type_names[t]
        merged: dict[tuple[str, ...], float] = {}  # a node's groups are one node on the route
        for r, route in enumerate(rs):
            if probs[r] > 0:
                key = tuple(names[n] for n in sorted(route, key=lambda n: first(tn, n)))
                merged[key] = merged.get(key, 0.0) + float(probs[r])
        routes[tn] = [{"nodes": list(k), "p": round(v, 6)} for k, v in merged.items()]
    data = {"kind": "plan", "name": name, "model": model.name, "gpu": gpu, "gpus": budget,
            "transfer_ms": transfer_ms, "nodes": list(nodes.values()), "routes": routes, "meta": meta or {}}
    return parse(PlanSpec, data)


def describe(spec: PlanSpec) -> str:
    """One line: ``4x (image_encoder+thinker, tp1, b128) + 11x (talker+code2wav, tp1, b64)``."""
    parts = []
    for n in spec.nodes:
        for g in n.executors:
            parts.append(f"{g.count}x ({'+'.join(n.components)}, tp{g.tp}, b{g.max_batch})")
    return " + ".join(parts)
