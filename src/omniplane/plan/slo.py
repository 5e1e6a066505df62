"""The one SLO resolver: latency targets per request type from an SLO policy (Cornfigurator
section 3.2, HorizonServe section 4.2). Every command that needs targets comes here: the planner
(``omniplane plan``), and, for a plan file without ``slo`` or a ``--slo`` policy, ``sim run``,
``rehearse`` and ``loadgen`` (:func:`targets_for`); the plan file stores what the planner
resolved (``PlanSpec.slo``), so planning, simulating and rehearsing one plan judge it by
identical targets.

* ``isolated_percentile`` (Cornfigurator's default, section 6.1): serve the type alone; among its
  deployments (every Keep/Merge partition of its path, every executor config per node) take
  the highest-throughput one (fewest GPU-seconds per request: a balanced allocation of
  continuous GPUs), and the ``percentile`` of its first-response latency at full occupancy,
  processing only (the profiler subtracts queueing, section 5.1), times ``multiplier``.
* ``solo_multiplier`` (HorizonServe section 6.1): ``multiplier`` x the ``percentile`` of the
  solo latency on one idle executor (:func:`omniplane.perf.solo.solo_percentiles`, the statistic
  the scheduler's offline calibration takes its SLO table from too).
* ``explicit``: the workload's ``targets_ms`` (a user's table).

A user's table (``--slo TYPE=DURATION``, parsed by :func:`omniplane.spec.parse_slo`) replaces
single types' targets afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from omniplane.perf import CostModel
from omniplane.perf.solo import solo_percentiles
from omniplane.plan.costs import CostTable
from omniplane.plan.enumerate import partitions
from omniplane.plan.flow import Candidates
from omniplane.plan.logical import Subplan, compose
from omniplane.plan.montecarlo import node_states, route_latency
from omniplane.plan.options import PlannerOptions
from omniplane.plan.problem import make_problem
from omniplane.plan.routing import node_share
from omniplane.spec import (
    ExplicitSLO,
    GeneratorKind,
    GPUKind,
    IsolatedPercentileSLO,
    LatencyTargets,
    ResolvedPlan,
    ResolvedWorkload,
    SLOChoice,
    SLOPolicy,
    SoloMultiplierSLO,
)
from omniplane.spec.slo import USER_TABLE, describe

DEFAULT_TRANSFER_S = 0.010  # plans' default transfer_ms (Cornfigurator section 5.2: ~10 ms median)


def resolve_targets(policy: SLOPolicy, table: CostTable, cost: CostModel,
                    overrides_ms: Mapping[str, float] | None = None, transfer_s: float = DEFAULT_TRANSFER_S,
                    seed: int = 0) -> LatencyTargets:
    """Targets for every type of ``table``'s model under ``policy``, then the user's table."""
    types = table.types
    ms: dict[str, float] = {}
    how: dict[str, str] = {}
    if isinstance(policy, ExplicitSLO):
        for t in types:
            if t in policy.targets_ms:
                ms[t] = policy.targets_ms[t]
                how[t] = "explicit"
    elif isinstance(policy, SoloMultiplierSLO):
        solo, cfg = solo_percentiles(table.model, cost, table.problem.gpu, policy.percentile, seed=seed)
        for t in types:
            ms[t] = policy.multiplier * solo[t] * 1e3
            how[t] = f"{policy.multiplier:g} x solo p{policy.percentile:g} (tp {cfg.tp})"
    else:
        assert isinstance(policy, IsolatedPercentileSLO)
        alone = table if not _pads(table) else CostTable(table.problem, cost, pad=False)
        for t in types:
            lat, desc = isolated_best(alone, t, transfer_s)
            ms[t] = policy.multiplier * float(np.percentile(lat, policy.percentile)) * 1e3
            how[t] = f"p{policy.percentile:g} x {policy.multiplier:g} of {desc}"
    for t, v in (overrides_ms or {}).items():
        ms[t] = v
        how[t] = USER_TABLE
    if not ms:
        raise ValueError(f"the SLO policy gives no target for any type of {table.model.name}")
    return LatencyTargets(targets_ms=ms, derived_from=policy, how=how)


def targets_for(workload: ResolvedWorkload, gpu: GPUKind, gpus: int, policy: SLOPolicy | None = None,
                overrides_ms: Mapping[str, float] | None = None, *, cost: CostModel | None = None,
                transfer_s: float = DEFAULT_TRANSFER_S,
                options: PlannerOptions | None = None) -> LatencyTargets:
    """What the planner resolves for ``workload`` on ``gpus`` GPUs of kind ``gpu`` with its default
    options (``PlannerOptions``: request sample and seed), for a command without a planner.
    ``policy`` defaults to the workload's. Builds the planner's profile only when a type still
    needs a target (a user's table naming every type needs nothing)."""
    policy = policy or workload.spec.slo
    opts = options or PlannerOptions()
    types = workload.model.type_names
    if overrides_ms and set(overrides_ms) >= set(types):
        return LatencyTargets(targets_ms=dict(overrides_ms), derived_from=None,
                              how=dict.fromkeys(overrides_ms, USER_TABLE))
    problem = make_problem(workload, gpu, gpus, samples=opts.mc_samples, seed=opts.seed)
    cost = cost or CostModel(workload.model)
    return resolve_targets(policy, CostTable(problem, cost), cost, overrides_ms, transfer_s, opts.seed)


def command_targets(choice: SLOChoice | None, workload: ResolvedWorkload, *, stored: LatencyTargets | None,
                    gpu: GPUKind | None, gpus: int | None, cost: CostModel | None = None,
                    where: str = "the plan file") -> tuple[LatencyTargets, str]:
    """The targets a command judges by (``sim run``, ``rehearse``, ``loadgen``) and one line saying
    where they come from. Base, in order: the ``--slo`` policy; ``--slo workload``; the plan's
    stored ``slo`` (the default when there is one, and ``--slo plan``; ``where`` names its
    holder); else the workload's policy, resolved as the planner would on GPU kind ``gpu`` and
    budget ``gpus``. A user's ``TYPE=DURATION`` items replace single types on top."""
    choice = choice or SLOChoice()
    user = dict(choice.targets_ms)
    if choice.base == "plan" and stored is None:
        raise ValueError(f"--slo plan: {where} has no slo (a hand-written plan, or one from before the "
                         "field); give a policy such as 'isolated p25' or '5x solo p95'")
    if choice.base in (None, "plan") and stored is not None:
        how = {**stored.how, **dict.fromkeys(user, USER_TABLE)}
        got = LatencyTargets(targets_ms={**stored.targets_ms, **user}, derived_from=stored.derived_from,
                             how=how)
        return got, f"{where}'s slo ({got.describe()})"
    if user and set(user) >= set(workload.model.type_names):
        return LatencyTargets(targets_ms=user, how=dict.fromkeys(user, USER_TABLE)), "--slo (every type)"
    given = None if choice.base is None or isinstance(choice.base, str) else choice.base
    policy = given or workload.spec.slo
    if gpu is None or gpus is None:
        raise ValueError(f"the {describe(policy)} targets need the GPU kind and budget they are for "
                         "(pass --gpu, or --slo TYPE=DURATION for every type)")
    got = targets_for(workload, gpu, gpus, policy, user, cost=cost)
    if given is not None:
        why = "--slo"
    else:
        why = f"workload {workload.spec.name!r}'s policy" + (f"; {where} has no slo" if choice.base is None
                                                             else "")
    return got, f"{got.describe()} resolved on {gpus} x {gpu.name} ({why})"


def plan_budget(plan: ResolvedPlan) -> int:
    """The GPU budget a plan was made for (its ``gpus``, else the GPUs it uses)."""
    return plan.spec.gpus or plan.spec.total_gpus


def target_array(targets: LatencyTargets, types: list[str]) -> np.ndarray:
    """Seconds in ``types`` order (inf: no target)."""
    sec = targets.seconds
    return np.array([sec.get(t, np.inf) for t in types])


def _pads(table: CostTable) -> bool:
    """True when some component batches pad to the largest member (a DiT or a VAE)."""
    return any(c.generator in (GeneratorKind.DIT, GeneratorKind.VAE) for c in table.model.components)


def isolated_best(table: CostTable, type_name: str, transfer_s: float) -> tuple[np.ndarray, str]:
    """Latency samples (at full occupancy) of the highest-throughput deployment of one type
    served alone, and a description of that deployment."""
    model = table.model
    t = table.types.index(type_name)
    path = table.paths[type_name]
    best: tuple[float, float, tuple[frozenset[str], ...], list[int]] | None = None
    for nodes in partitions(model, frozenset(path)):
        gpu_s = 0.0
        choice: list[int] = []
        for node in nodes:
            nc = table.node(node)
            if not nc.options:
                gpu_s = np.inf
                break
            per = nc.s_full[:, t] * nc.tp
            choice.append(int(np.argmin(per)))
            gpu_s += float(per.min())
        if not np.isfinite(gpu_s):
            continue
        lat = _latency(table, t, nodes, choice, transfer_s)
        key = (gpu_s, float(np.median(lat)))
        if best is None or key < best[:2]:
            best = (key[0], key[1], nodes, choice)
    if best is None:
        raise ValueError(f"no deployment of {type_name!r} fits on {table.problem.gpu.name}")
    _, _, nodes, choice = best
    lat = _latency(table, t, nodes, choice, transfer_s)
    desc = ", ".join(f"{table.node(n).name} tp{table.node(n).options[o][0]} b{table.node(n).options[o][1]}"
                     for n, o in zip(nodes, choice, strict=True))
    return lat[0], f"[{desc}] saturated by this type alone, {1 / best[0]:.2f} req/s per GPU"


def _latency(table: CostTable, t: int, nodes: tuple[frozenset[str], ...], choice: list[int],
             transfer_s: float) -> np.ndarray:
    """Latency samples ``[1, K]`` with every node saturated by type ``t`` alone (each executor
    receives its full-occupancy throughput); components of a merged node take the occupancy
    Little's law gives them at that rate (montecarlo.node_states)."""
    model = table.model
    n_types = len(table.types)
    route = tuple(range(len(nodes)))
    routes = tuple(((route, 0),) if i == t else () for i in range(n_types))
    lp = compose((Subplan(nodes, routes, 1),), n_types)
    costs = tuple(table.node(n) for n in nodes)
    p = np.zeros((1, n_types, 1))
    p[0, t, 0] = 1.0
    opt = np.array([choice])
    lam = np.zeros((1, len(nodes), n_types))
    for i, nc in enumerate(costs):
        lam[0, i, t] = 1.0 / nc.s_full[choice[i], t]
    cands = Candidates(lp, costs, p, node_share(lp, p), opt, np.ones_like(opt), np.zeros(1, dtype=int),
                       np.ones(1), np.ones(1, dtype=int))
    state = node_states(cands, table, lam, queueing=False, spread=False)  # processing only (section 5.1)
    del model
    return route_latency(table, cands, state, t, lp.routes[t][0], transfer_s)
