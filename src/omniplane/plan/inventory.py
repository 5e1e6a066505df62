"""Mixed fleets: the best plan within an inventory of several GPU kinds (``omniplane plan
--inventory H100:8,L40S:16``), in the vLLM-Omni runtime space (docs/decisions/0017-mixed-fleets.md).

* **Space.** One whole-pipeline deployment whose nodes are the runtime's groupings of vLLM-Omni
  stages (:func:`omniplane.plan.runtime.groupings`: each stage alone, or stages sharing a GPU);
  every node is assigned a GPU kind of the inventory (kinds ** nodes assignments per grouping).
  A node is kept on a kind only when the runtime's fit check on that kind leaves it an executor
  config (``StageFit``, per kind); of those the config with the fewest GPU-seconds per request
  (full batch, the workload's mix) is used.
* **Sizing (a heuristic: a flow balance).** Each node's replicas carry the rate the others
  carry: at rate ``R`` a node needs ``ceil(R w_n)`` executors of ``tp_n`` GPUs (``w_n``: its
  executor-seconds per request at full batch, or its link-seconds if longer: the bytes its
  edges carry over its links, omniplane.plan.inventory_links). The inventory's rate is the
  largest ``R`` whose per-kind GPU sums fit each kind's count (bisection); GPUs left on a kind
  go one executor at a time to that kind's most loaded node. With a target rate the node counts
  at that rate are kept as they are (the cheapest subset).
* **Choice.** Candidates ranked by that rate (or, at a target rate, by hourly cost) are
  simulated on one request sample (common random numbers); the pick is the most goodput (at a
  target rate: the cheapest that meets, then one GPU fewer per kind: inventory_minimal).
* **Bound.** A candidate's binding kind is the one whose GPUs it fills most at its rate; its
  binding stage the node using most of that kind's GPU-seconds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from omniplane.plan.costs import CostTable
from omniplane.plan.logical import Node
from omniplane.spec import ModelSpec, PlanSpec
from omniplane.spec.gpu import GPUCatalog

HEURISTIC = ("flow balance: each stage's replicas carry the rate the others carry (ceil(R x executor-seconds "
             "per request at full batch, or link-seconds of its edges' bytes if longer)), "
             "the largest R whose per-kind GPUs fit the inventory; leftover "
             "GPUs to the kind's most loaded stage")
PAYS_MARGIN = 0.05  # assumption: goodput per dollar within 5% on one request sample is a tie
# assumption: stages x kinds stays small (Qwen3-Omni: 3 stages, 2 kinds: 8 per grouping)
MAX_ASSIGNMENTS = 4096


class InventoryError(ValueError):
    """A malformed ``--inventory`` (the message names the item and what was expected)."""


def parse_inventory(text: str, catalog: GPUCatalog) -> dict[str, int]:
    """``H100:8,L40S:16`` -> ``{"H100-SXM": 8, "L40S": 16}`` (catalog names, each kind once)."""
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        kind, sep, count = item.partition(":")
        if not sep or not count.strip().isdigit() or int(count) < 1:
            raise InventoryError(f"--inventory: {item!r}: expected KIND:COUNT with COUNT >= 1, e.g. H100:8")
        try:
            name = catalog.get(kind.strip()).name
        except KeyError:
            raise InventoryError(f"--inventory: unknown GPU kind {kind.strip()!r} (expected one of "
                                 f"{', '.join(catalog.names())})") from None
        if name in out:
            raise InventoryError(f"--inventory: {name} given twice")
        out[name] = int(count)
    if not out:
        raise InventoryError("--inventory: give at least one KIND:COUNT, e.g. H100:8,L40S:16")
    return out


@dataclass(frozen=True)
class Option:
    """A node's executor config on one kind: ``w`` executor-seconds per request (full batch)."""

    kind: str
    tp: int
    max_batch: int
    w: float
    per_type: tuple[float, ...] = ()  # GPU-seconds per request of each type (full batch)
    link: float = 0.0  # link-seconds per request per executor (omniplane.plan.inventory_links)

    @property
    def load(self) -> float:
        """Executor-seconds per request: its GPU time or, if longer, its link time."""
        return max(self.w, self.link)


@dataclass
class Candidate:
    nodes: tuple[Node, ...]
    options: tuple[Option, ...]
    replicas: tuple[int, ...]
    flow_rps: float  # the flow balance's rate
    hourly: float | None = None
    goodput: float | None = None  # simulated, req/s
    attainment: dict[str, float] = field(default_factory=dict)
    simulated_at: float | None = None

    def gpus_by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o, r in zip(self.options, self.replicas, strict=True):
            out[o.kind] = out.get(o.kind, 0) + o.tp * r
        return out

    def dollar_weights(self, usd: Mapping[str, float], types: Sequence[str]) -> dict[str, float]:
        """Per type: the dollars one request costs at full batch, each stage at its kind's
        price (the weights of the per-type cost attribution)."""
        out = dict.fromkeys(types, 0.0)
        for o in self.options:
            for t, g in zip(types, o.per_type, strict=False):
                out[t] += g * usd.get(o.kind, 0.0)
        return out

    def describe(self, model: ModelSpec) -> str:
        return ", ".join(f"{'+'.join(model.ordered(n))}: {r} x {o.kind} (tp {o.tp})"
                         for n, o, r in zip(self.nodes, self.options, self.replicas, strict=True))

    def bound(self, model: ModelSpec, counts: Mapping[str, int]) -> tuple[str, str]:
        """``(kind, stage)`` that bound the candidate's rate (module docstring)."""
        load: dict[str, float] = {}
        for o in self.options:
            load[o.kind] = load.get(o.kind, 0.0) + self.flow_rps * o.w * o.tp
        kind = max(load, key=lambda k: load[k] / counts[k])
        on = [(n, o) for n, o in zip(self.nodes, self.options, strict=True) if o.kind == kind]
        node = max(on, key=lambda no: no[1].w * no[1].tp)[0]
        return kind, "+".join(model.ordered(node))


def best_option(table: CostTable, node: Node, kind: str, pi: np.ndarray) -> Option | None:
    """The node's config on ``table``'s kind with the fewest GPU-seconds per request; None when
    none fits (the runtime's fit check)."""
    nc = table.node(node)
    if not nc.options:
        return None
    s = np.nan_to_num(nc.s_full, nan=0.0, posinf=np.inf)
    w = (s * pi[None, :]).sum(axis=1)  # [O] executor-seconds per request
    gpu_s = w * nc.tp
    if not np.isfinite(gpu_s).any():
        return None
    o = int(np.argmin(np.where(np.isfinite(gpu_s), gpu_s, np.inf)))
    tp, batch = nc.options[o]
    return Option(kind, int(tp), int(batch), float(w[o]), tuple(float(x) * float(tp) for x in s[o]))


def size(options: Sequence[Option], counts: Mapping[str, int], rate: float | None = None
         ) -> tuple[tuple[int, ...], float] | None:
    """Replicas per node and the flow rate (module docstring); with ``rate``: the replicas that
    carry it, None when they do not fit the counts."""

    def need(r: float) -> list[int]:
        return [max(1, math.ceil(r * o.load - 1e-9)) for o in options]

    def fits(reps: Sequence[int]) -> bool:
        used: dict[str, int] = {}
        for o, n in zip(options, reps, strict=True):
            used[o.kind] = used.get(o.kind, 0) + n * o.tp
        return all(used[k] <= counts.get(k, 0) for k in used)

    if rate is not None:
        reps = need(rate)
        return (tuple(reps), min(n / o.load if o.load > 0 else math.inf
                                 for o, n in zip(options, reps, strict=True))) if fits(reps) else None
    if not fits(need(0.0)):
        return None
    per_kind: dict[str, float] = {}
    for o in options:
        per_kind[o.kind] = per_kind.get(o.kind, 0.0) + o.load * o.tp
    hi = min(counts[k] / v for k, v in per_kind.items() if v > 0) if any(per_kind.values()) else 1e6
    lo = 0.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits(need(mid)) else (lo, mid)
    reps = need(lo)
    free = dict(counts)
    for o, n in zip(options, reps, strict=True):
        free[o.kind] -= n * o.tp
    while True:  # leftover GPUs: one executor at a time to the kind's most loaded node
        room = [i for i, o in enumerate(options) if free[o.kind] >= o.tp and o.load > 0]
        if not room:
            break
        i = max(room, key=lambda i: options[i].load / reps[i])
        reps[i] += 1
        free[options[i].kind] -= options[i].tp
    rate_out = min(n / o.load if o.load > 0 else math.inf for o, n in zip(options, reps, strict=True))
    return tuple(reps), rate_out


def candidates(model: ModelSpec, groupings: Sequence[tuple[Node, ...]], tables: Mapping[str, CostTable],
               counts: Mapping[str, int], pi: np.ndarray, rate: float | None = None,
               best: dict[tuple[Node, str], Option | None] | None = None,
               links: Callable[[tuple[Node, ...], list[Option], float | None], tuple[list[Option], Any]]
               | None = None
               ) -> list[Candidate]:
    """Every grouping x assignment of its nodes to kinds that fits (module docstring), best
    flow rate first (with ``rate``: those carrying it). ``best`` collects each (node, kind)'s
    config (None: does not fit); ``links`` adds each node's link time to its options and sizes
    them (omniplane.plan.inventory_links.sized)."""
    kinds = list(counts)
    best = {} if best is None else best
    out: list[Candidate] = []
    n_assign = 0
    for nodes in groupings:
        for assign in itertools.product(kinds, repeat=len(nodes)):
            n_assign += 1
            if n_assign > MAX_ASSIGNMENTS:
                break
            opts = []
            for node, kind in zip(nodes, assign, strict=True):
                if (node, kind) not in best:
                    best[node, kind] = best_option(tables[kind], node, kind, pi)
                o = best[node, kind]
                if o is None:
                    break
                opts.append(o)
            else:
                opts, sized = (opts, size(opts, counts, rate)) if links is None else links(nodes, opts, rate)
                if sized is not None:
                    out.append(Candidate(nodes, tuple(opts), sized[0], sized[1]))
    out.sort(key=lambda c: -c.flow_rps)
    return out


def to_spec(model: ModelSpec, c: Candidate, name: str, host_gpus: int | None = None) -> PlanSpec:
    """The candidate as a plan file: one node per stage group, each group on its kind (and
    ``meta.inventory.host_gpus``: where the simulator places its edges, omniplane.sim.build)."""
    from omniplane.plan.runtime import mark_shared

    kinds = c.gpus_by_kind()
    main = max(kinds, key=lambda k: kinds[k])
    nodes = [{"name": "+".join(model.ordered(n)), "components": model.ordered(n),
              "executors": [{"count": r, "tp": o.tp, "max_batch": o.max_batch, "gpu": o.kind}]}
             for n, o, r in zip(c.nodes, c.options, c.replicas, strict=True)]
    inv: dict[str, Any] = {"heuristic": HEURISTIC, "gpus": kinds}
    if host_gpus:
        inv["host_gpus"] = host_gpus
    routes = {}
    for t in model.type_names:
        path = set(model.path_of(t))
        routes[t] = [{"nodes": [nd["name"] for nd, n in zip(nodes, c.nodes, strict=True) if n & path],
                      "p": 1.0}]
    spec = PlanSpec.model_validate({"name": name, "model": model.name, "gpu": main,
                                    "gpus": sum(kinds.values()),
                                    "nodes": nodes, "routes": routes,
                                    "meta": {"inventory": inv}})
    return mark_shared(spec, model)


@dataclass
class SingleKind:
    """The existing planner on one kind alone with the GPUs the same dollars buy (rounded down)."""

    kind: str
    gpus: int
    hourly: float
    goodput: float | None = None
    attainment: dict[str, float] = field(default_factory=dict)
    simulated_at: float | None = None
    plan: PlanSpec | None = None
    note: str = ""


@dataclass
class InventoryResult:
    counts: dict[str, int]
    host_gpus: int
    rate: float | None  # a target rate (the cheapest subset), else None (the most goodput)
    target: float
    found: int  # candidates that fit
    tried: list[Candidate]
    pick: Candidate | None = None
    spec: PlanSpec | None = None
    singles: list[SingleKind] = field(default_factory=list)
    pays: bool | None = None
    why: str = ""
    seconds: float = 0.0
    options: dict[tuple[Node, str], Option | None] = field(default_factory=dict)  # (node, kind) -> config
    usd: dict[str, float] = field(default_factory=dict)  # USD per GPU-hour per kind priced
    mix: dict[str, float] = field(default_factory=dict)  # the type mix planned
    # the most-goodput pick without the replicas its flow leaves idle, and each kind alone at its cost
    trimmed: Candidate | None = None
    trimmed_singles: list[SingleKind] = field(default_factory=list)
    one_fewer: list[Any] = field(default_factory=list)  # at a rate: inventory_minimal.OneFewer rows
    dropped: int = 0  # GPUs the descent dropped from the search's first meeting candidate

    def cost_per_1k(self, c: Candidate) -> dict[str, float | None]:
        """USD per 1,000 requests of each type at the rate ``c`` was simulated at (each stage
        at its kind's price; ``plan.prices.costs``)."""
        from omniplane.plan.prices import costs

        if c.hourly is None or not c.simulated_at:
            return dict.fromkeys((t for t, f in self.mix.items() if f > 0), None)
        return costs(None, 0, c.simulated_at, self.mix, c.dollar_weights(self.usd, list(self.mix)),
                     hourly=c.hourly)[1]

    def stage_costs(self, model: ModelSpec) -> dict[str, dict[str, float | None]]:
        """Per stage group and kind: GPU-seconds per request at full batch (None: does not fit)."""
        out: dict[str, dict[str, float | None]] = {}
        for (node, kind), o in self.options.items():
            out.setdefault("+".join(model.ordered(node)), {})[kind] = None if o is None else o.w * o.tp
        return out


def _sim(sim: object, spec: PlanSpec, rate: float | None,
         around: float) -> tuple[float, dict[str, float], float]:
    """``(goodput, attainment per active type, offered rate)``: at ``rate``, or the best total
    goodput over offered rates around ``around`` (``refine.max_goodput``)."""
    from omniplane.plan.refine import SampleRunner, max_goodput

    assert isinstance(sim, SampleRunner)
    out = sim.run(spec, rate) if rate is not None else max_goodput(sim, spec, max(around, 1e-3))[0]
    sampled = {r.type for r in sim.base}  # every type of the sample, met or not
    att = {t: float(out.attainment[i]) for i, t in enumerate(sim.types) if t in sampled}
    return float(out.goodput.sum()), att, float(out.rate)


def search(bases: Mapping[str, tuple[object, object]], counts: Mapping[str, int],
           prices: Mapping[str, object],
           *, host_gpus: int = 8, rate: float | None = None, target: float = 0.9, top: int = 4,
           compare: bool = True, say: object = None) -> InventoryResult:
    """The inventory's pick (module docstring) and, with ``compare``, each kind alone at the
    same hourly cost. ``bases``: kind -> (its base ``Planner`` in the vLLM-Omni space, that
    space); the first kind's request sample and latency targets serve every simulation."""
    import time

    from omniplane.plan.pipeline import Planner
    from omniplane.plan.prices import Price, plan_hourly
    from omniplane.plan.runtime import groupings
    from omniplane.spec.load import load_layout

    t0 = time.perf_counter()
    log = say if callable(say) else (lambda _m: None)
    first = next(iter(bases))
    base0 = bases[first][0]
    assert isinstance(base0, Planner)
    model, pi = base0.problem.model, base0.problem.pi()
    layout = load_layout(model.name)
    if layout is None:
        raise InventoryError(f"--inventory: {model.name} has no vLLM-Omni layout (the inventory search "
                             "plans vLLM-Omni's space)")
    tables = {k: b.table for k, (b, _) in bases.items() if isinstance(b, Planner)}
    price = {k: p for k, p in prices.items() if isinstance(p, Price)}
    per: dict[tuple[Node, str], Option | None] = {}
    from omniplane.plan.inventory_links import mean_edge_bytes, sized

    gpu_of = {k: t.problem.gpu for k, t in tables.items()}
    means = mean_edge_bytes(model, base0.problem.samples, pi)

    def links(nodes: tuple[Node, ...], opts: list[Option], r: float | None) -> tuple[list[Option], Any]:
        return sized(model, nodes, opts, gpu_of, counts, host_gpus, means, r, size)

    cands = [c for c in candidates(model, groupings(model, layout), tables, counts, pi, rate, per, links)
             if all(o.tp <= host_gpus for o in c.options)]  # a TP group never spans hosts
    res = InventoryResult(dict(counts), host_gpus, rate, target, len(cands), [])
    res.options = per
    res.usd = {k: p.usd_per_gpu_hour for k, p in price.items() if k in counts}
    res.mix = {t: float(base0.problem.mix.get(t, 0.0)) for t in base0.problem.types}
    sim = base0.simulator
    active = [t for t in base0.problem.types if base0.problem.mix.get(t, 0.0) > 0]
    for c in cands:
        c.hourly = plan_hourly(to_spec(model, c, "x", host_gpus), price)[0]
    if rate is not None:
        cands.sort(key=lambda c: (c.hourly if c.hourly is not None else math.inf, -c.flow_rps))
    def run(c: Candidate) -> None:
        c.hourly = plan_hourly(to_spec(model, c, "x", host_gpus), price)[0]
        c.goodput, c.attainment, c.simulated_at = _sim(sim, to_spec(model, c, f"{model.name}-inventory",
                                                                     host_gpus), rate, c.flow_rps)

    for c in cands[:top]:
        run(c)
        res.tried.append(c)
        log(f"inventory candidate {c.describe(model)}: {c.goodput:.2f} req/s")
        if rate is not None and _meets(c.attainment, active, target):
            break
    if rate is not None:
        meeting = [c for c in res.tried if _meets(c.attainment, active, target)]
        res.pick = meeting[0] if meeting else None
        if res.pick is not None:  # the evidence of minimality (omniplane.plan.inventory_minimal)
            from omniplane.plan.inventory_minimal import descend

            res.pick, res.one_fewer, res.dropped = descend(res.pick, rate, target, active, run, lambda c, b: (
                None if (s := size(c.options, b)) is None else Candidate(c.nodes, c.options, *s)), log)
    else:
        res.pick = max(res.tried, key=lambda c: c.goodput or 0.0, default=None)
    if res.pick is None:
        res.why = ("no assignment of stages to kinds fits the inventory" if not cands else
                   f"none of the {len(res.tried)} cheapest candidates meets {target:.0%} of every type at "
                   f"{rate:g} req/s")
        res.seconds = time.perf_counter() - t0
        return res
    res.spec = to_spec(model, res.pick, f"{model.name}-inventory", host_gpus)
    hourly = res.pick.hourly
    if compare and hourly is not None:
        res.singles = _singles(bases, price, hourly, sim, rate, log)
        res.pays, res.why = _verdict(res, model, active)
        trimmed = size(res.pick.options, counts, res.pick.flow_rps) if rate is None else None
        if trimmed is not None and trimmed[0] != res.pick.replicas:  # the mix without idle replicas
            t = Candidate(res.pick.nodes, res.pick.options, trimmed[0], trimmed[1])
            t.hourly = plan_hourly(to_spec(model, t, "x", host_gpus), price)[0]
            spec = to_spec(model, t, f"{model.name}-inventory-trimmed", host_gpus)
            t.goodput, t.attainment, t.simulated_at = _sim(sim, spec, None, t.flow_rps)
            log(f"trimmed {t.describe(model)}: {t.goodput:.2f} req/s")
            res.trimmed = t
            if t.hourly is not None:
                res.trimmed_singles = _singles(bases, price, t.hourly, sim, None, log)
                other = replace(res, pick=t, singles=res.trimmed_singles)
                pays, why = _verdict(other, model, active)
                res.why += f". Trimmed to its stages' flow ({t.describe(model)}): {why}"
                res.pays = bool(res.pays) or bool(pays)
    res.seconds = time.perf_counter() - t0
    return res


def _singles(bases: Mapping[str, tuple[object, object]], price: Mapping[str, Any], hourly: float, sim: Any,
             rate: float | None, log: Any) -> list[SingleKind]:
    """The existing planner on each priced kind alone at the GPUs ``hourly`` buys (rounded
    down), simulated on ``sim``'s sample (at ``rate``, else at its best goodput)."""
    from omniplane.plan.pipeline import Planner

    out = []
    for kind, (b, space) in bases.items():
        assert isinstance(b, Planner)
        if kind not in price:
            continue
        n = int(hourly // price[kind].usd_per_gpu_hour)
        one = SingleKind(kind, n, n * price[kind].usd_per_gpu_hour)
        out.append(one)
        if n < 1:
            one.note = "the same dollars buy no GPU of this kind"
            continue
        p = Planner(b.problem.with_budget(n), options=b.options, cost=b.cost, table=b.table,
                    targets=b.targets, policy=b.policy_name, transfer_s=b.transfer_s, gpus=b.gpus)
        p._sim = sim  # the same request sample
        found = p.run(space)  # type: ignore[arg-type]
        if found.best is None:
            one.note = f"no plan fits {n} x {kind}"
            continue
        one.plan = found.best.plan
        one.goodput, one.attainment, one.simulated_at = _sim(sim, one.plan, rate, found.best.outcome.rate)
        log(f"{kind} alone, {n} GPUs (${one.hourly:.2f}/h): {one.goodput:.2f} req/s")
    return out


def _meets(att: Mapping[str, float], active: Sequence[str], target: float) -> bool:
    return all(att.get(t, 0.0) >= target for t in active)


def _verdict(res: InventoryResult, model: ModelSpec, active: Sequence[str]) -> tuple[bool | None, str]:
    """Whether the inventory's pick beats every kind alone at its hourly cost, and why not."""
    pick = res.pick
    assert pick is not None
    rivals = [s for s in res.singles if s.goodput is not None]
    if not rivals:
        return None, "no kind alone could be planned at the same hourly cost"
    kind, stage = pick.bound(model, res.counts)
    kinds = pick.gpus_by_kind()
    mixed = len(kinds) > 1
    if res.rate is not None:
        best = min((s for s in rivals if _meets(s.attainment, active, res.target)), key=lambda s: s.hourly,
                   default=None)
        if best is None:
            return True, "no kind alone meets the targets at the same hourly cost"
        return (best.hourly > (pick.hourly or 0.0),
                f"{best.kind} alone ({best.gpus} GPUs, ${best.hourly:.2f}/h) also meets; bound: {stage} "
                f"on {kind}")
    def per_usd(goodput: float | None, hourly: float | None) -> float:
        return (goodput or 0.0) / hourly if hourly else 0.0

    best = max(rivals, key=lambda s: per_usd(s.goodput, s.hourly))
    mine, theirs = per_usd(pick.goodput, pick.hourly), per_usd(best.goodput, best.hourly)
    gain = mine / theirs if theirs > 0 else math.inf
    head = (f"{gain:.2f}x the goodput per dollar of {best.kind} alone ({best.gpus} GPUs, "
            f"${best.hourly:.2f}/h: {best.goodput or 0.0:.2f} req/s; the pick ${pick.hourly or 0.0:.2f}/h: "
            f"{pick.goodput or 0.0:.2f} req/s)")
    if mixed and gain > 1 + PAYS_MARGIN:
        return True, f"mixing pays: {head}; the mix is bound by stage {stage} on {kind}"
    where = "the best assignment keeps every stage on one kind" if not mixed else "the best mix"
    return False, (f"mixing does not pay here (margin {PAYS_MARGIN:.0%}): {where} serves {head}; it is "
                   "bound by "
                   f"stage {stage} on {kind} ({res.counts[kind]} GPUs), which "
                   f"{_ratio(stage, model, kind, res)}")


def _ratio(stage: str, model: ModelSpec, kind: str, res: InventoryResult) -> str:
    """How the binding stage's GPU-seconds (and dollars) per request compare on the other kinds."""
    costs = res.stage_costs(model).get(stage, {})
    mine = costs.get(kind)
    parts = []
    for k, v in costs.items():
        if k == kind:
            continue
        if v is None or not mine:
            parts.append(f"does not fit {k}")
            continue
        dollars = (f" and {v * res.usd[k] / (mine * res.usd[kind]):.2f}x the dollars"
                   if k in res.usd and kind in res.usd else "")
        parts.append(f"costs {v / mine:.2f}x the GPU-seconds per request on {k}{dollars}")
    return ", ".join(parts) if parts else "has no other kind"
