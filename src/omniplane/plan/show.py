"""A plan file drawn as text: nodes, executors, GPUs, routes and the predicted goodput."""

from __future__ import annotations

from typing import Any

from omniplane.spec import PlanSpec


def render(spec: PlanSpec) -> str:
    lines = [f"plan {spec.name or '(unnamed)'}: {spec.model} on {spec.total_gpus}"
             f"{f' of {spec.gpus}' if spec.gpus else ''} x {spec.gpu}, transfer {spec.transfer_ms:g} ms/edge"]
    lines.append("")
    lines.append("nodes")
    width = max(len(n.name) for n in spec.nodes)
    for n in spec.nodes:
        groups = ", ".join(f"{g.count} x (tp {g.tp}, max batch {g.max_batch})" for g in n.executors)
        gpus = "#" * n.gpus
        lines.append(f"  {n.name:<{width}}  {groups:<34} {n.gpus:>3} GPU  {gpus}")
        for t, probs in n.routing.items():
            lines.append(f"  {'':<{width}}    routing {t}: {', '.join(f'{p:g}' for p in probs)}")
    lines.append("")
    lines.append("routes (per request type)")
    tw = max(len(t) for t in spec.routes)
    for t, routes in spec.routes.items():
        for i, r in enumerate(routes):
            head = t if i == 0 else ""
            lines.append(f"  {head:<{tw}}  {r.p:>4.2f}  " + " -> ".join(r.nodes))
    good = spec.meta.get("predicted_goodput_rps")
    if isinstance(good, dict):
        lines.append("")
        lines.append(_goodput(good, spec.meta))
    return "\n".join(lines)


def _goodput(good: dict[str, Any], meta: dict[str, Any]) -> str:
    per = good.get("per_type", {})
    rate = meta.get("evaluated_at_rps")
    head = f"predicted goodput {good.get('total', 0):.2f} req/s"
    if rate is not None:
        head += f" at {rate:.2f} req/s offered"
    body = ", ".join(f"{t} {v:.2f}" for t, v in per.items())
    return f"{head}\n  {body}" if body else head
