"""A plan file drawn as text: nodes, executors, GPUs, routes and the predicted goodput."""

from __future__ import annotations

from omniplane.spec import PlanSpec, Prediction


def render(spec: PlanSpec) -> str:
    kinds = spec.gpus_by_kind()
    budget = f" of {spec.gpus}" if spec.gpus else ""
    on = (f"{spec.total_gpus}{budget} x {spec.gpu}" if len(kinds) == 1
          else " + ".join(f"{n} x {k}" for k, n in kinds.items()))
    lines = [f"plan {spec.name or '(unnamed)'}: {spec.model} on {on}, transfer {spec.transfer_ms:g} ms/edge"]
    lines.append("")
    lines.append("nodes")
    width = max(len(n.name) for n in spec.nodes)
    for n in spec.nodes:
        groups = ", ".join(f"{g.count} x (tp {g.tp}, max batch {g.max_batch}"
                           f"{f', {g.gpu}' if g.gpu is not None and g.gpu != spec.gpu else ''})"
                           for g in n.executors)
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
    if spec.slo is not None:
        lines.append("")
        lines.append(f"latency targets ({spec.slo.describe()})")
        lines.append("  " + ", ".join(f"{t} {ms:.0f} ms" for t, ms in spec.slo.targets_ms.items()))
    if spec.prediction is not None:
        lines.append("")
        lines.append(_goodput(spec.prediction))
    return "\n".join(lines)


def _goodput(pred: Prediction) -> str:
    head = (f"predicted goodput {pred.goodput_rps.total:.2f} req/s at {pred.offered_rps:.2f} req/s offered "
            f"({pred.workload}, {pred.requests} simulated requests)")
    body = ", ".join(f"{t} {v:.2f}" for t, v in pred.goodput_rps.per_type.items())
    return f"{head}\n  {body}" if body else head
