"""The one SLO resolver: latency targets per request type from an SLO policy (Cornfigurator
section 3.2, HorizonServe section 4.2). Every command that needs targets comes here: the planner
(``omniplane plan``), and, for a plan file without ``slo`` or a ``--slo`` policy, ``sim run``,
``rehearse`` and ``loadgen`` (:func:`targets_for`); the plan file stores what the planner
resolved (``PlanSpec.slo``), so planning, simulating and rehearsing one plan judge it by
identical targets. Targets are :class:`omniplane.spec.LatencyTargets` (the plan file's ``slo``).

* ``isolated_percentile`` (Cornfigurator's default, section 6.1): serve the type alone; among its
  deployments (every Keep/Merge partition of its path, every executor config per node) take
  the highest-throughput one (fewest GPU-seconds per request: a balanced allocation of
  continuous GPUs), and the ``percentile`` of its first-response latency at full occupancy,
  processing only (the profiler subtracts queueing, section 5.1), times ``multiplier``
  (:mod:`omniplane.plan.isolated`, on the planner's cost table).
* ``solo_multiplier`` (HorizonServe section 6.1): ``multiplier`` x the ``percentile`` of the
  solo latency on one idle executor (:func:`omniplane.perf.solo.solo_percentiles`, the statistic
  the scheduler's offline calibration takes its SLO table from too).
* ``explicit``: the workload's ``targets_ms`` (a user's table).

A user's table (``--slo TYPE=DURATION``, parsed by :func:`omniplane.spec.parse_slo`) replaces
single types' targets afterwards. The planner's modules are imported only where a policy needs
its cost table, so commands that judge a plan by its stored targets never load them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.perf.solo import SOLO_SAMPLES, solo_percentiles
from omniplane.spec import (
    ExplicitSLO,
    GPUKind,
    IsolatedPercentileSLO,
    LatencyTargets,
    ModelSpec,
    ResolvedPlan,
    ResolvedWorkload,
    SLOChoice,
    SLOPolicy,
    SoloMultiplierSLO,
)
from omniplane.spec.slo import USER_TABLE, describe

if TYPE_CHECKING:
    from omniplane.plan.costs import CostTable
    from omniplane.plan.options import PlannerOptions
    from omniplane.plan.runtime import Setup
    from omniplane.plan.space import Space

DEFAULT_TRANSFER_S = 0.010  # plans' default transfer_ms (Cornfigurator section 5.2: ~10 ms median)


def resolve_targets(policy: SLOPolicy, table: CostTable, cost: CostModel,
                    overrides_ms: Mapping[str, float] | None = None, transfer_s: float = DEFAULT_TRANSFER_S,
                    seed: int = 0, space: Space | None = None) -> LatencyTargets:
    """Targets for every type of ``table``'s model under ``policy``, then the user's table.
    ``space``: the plan space searched (None: Algorithm 1's whole space); an
    ``isolated_percentile`` policy picks each type's isolated deployment among what that space
    can build, on ``table`` (the space's own cost table: its fit check and prices)."""
    types = table.types
    ms: dict[str, float] = {}
    how: dict[str, str] = {}
    if isinstance(policy, ExplicitSLO):
        for t in types:
            if t in policy.targets_ms:
                ms[t] = policy.targets_ms[t]
                how[t] = "explicit"
    elif isinstance(policy, SoloMultiplierSLO):
        solo, _ = solo_targets(table.model, cost, table.problem.gpu, policy, seed=seed)
        for t in types:
            ms[t] = solo.targets_ms[t]
            how[t] = solo.how[t]
    else:
        assert isinstance(policy, IsolatedPercentileSLO)
        from omniplane.plan.isolated import deployments, isolated_best, unpadded

        alone = unpadded(table, cost)
        where = "" if space is None or space.full else f", in the {space.name} space"
        for t in types:
            lat, desc = isolated_best(alone, t, transfer_s, deployments(alone, t, space))
            ms[t] = policy.multiplier * float(np.percentile(lat, policy.percentile)) * 1e3
            how[t] = f"p{policy.percentile:g} x {policy.multiplier:g} of {desc}{where}"
    for t, v in (overrides_ms or {}).items():
        ms[t] = v
        how[t] = USER_TABLE
    if not ms:
        raise ValueError(f"the SLO policy gives no target for any type of {table.model.name}")
    return LatencyTargets(targets_ms=ms, derived_from=policy, how=how)


def space_targets(rt: Setup, policy: SLOPolicy, overrides_ms: Mapping[str, float] | None = None,
                  seed: int = 0) -> LatencyTargets:
    """One command's targets (its plan, the stock layout replicated, the ideal comparison and every
    capacity probe judge by these): ``policy`` resolved in the plan space ``rt`` searches, on its
    cost table (docs/decisions/0019-targets-in-runtime-space.md)."""
    return resolve_targets(policy, rt.table, rt.table.cost, overrides_ms, seed=seed, space=rt.space)


def solo_targets(model: ModelSpec, cost: CostModel, gpu: GPUKind, policy: SoloMultiplierSLO, *,
                 seed: int = 0, n: int = SOLO_SAMPLES) -> tuple[LatencyTargets, ExecutorConfig]:
    """Every type's target under a ``solo_multiplier`` policy: ``multiplier`` x its solo
    ``percentile`` first-response latency on ``gpu`` (:func:`omniplane.perf.solo.solo_percentiles`,
    what ``omniplane perf solo`` prints), and the solo deployment it ran on; no planner needed."""
    solo, cfg = solo_percentiles(model, cost, gpu, policy.percentile, n=n, seed=seed)
    how = f"{policy.multiplier:g} x solo p{policy.percentile:g} (tp {cfg.tp})"
    ms = {t: policy.multiplier * solo[t] * 1e3 for t in model.type_names}
    return LatencyTargets(targets_ms=ms, derived_from=policy, how=dict.fromkeys(ms, how)), cfg


def explicit_targets(policy: ExplicitSLO, types: Sequence[str]) -> LatencyTargets:
    """An ``explicit`` policy's targets for the request types ``types`` (in the policy's order):
    no profile needed."""
    ms = {t: v for t, v in policy.targets_ms.items() if t in types}
    if not ms:
        raise ValueError(f"the explicit SLO targets name none of the request types {list(types)}")
    return LatencyTargets(targets_ms=ms, derived_from=policy, how=dict.fromkeys(ms, "explicit"))


def targets_for(workload: ResolvedWorkload, gpu: GPUKind, gpus: int, policy: SLOPolicy | None = None,
                overrides_ms: Mapping[str, float] | None = None, *, cost: CostModel | None = None,
                transfer_s: float = DEFAULT_TRANSFER_S,
                options: PlannerOptions | None = None, runtime: str | None = None) -> LatencyTargets:
    """What the planner resolves for ``workload`` on ``gpus`` GPUs of kind ``gpu`` with its default
    options (``PlannerOptions``: request sample and seed), for a command without a planner.
    ``policy`` defaults to the workload's; ``runtime``: the plan space the targets are resolved
    in (``omniplane plan --runtime``; None: the ideal space). Builds the planner's profile only
    when a type still needs a target (a user's table naming every type needs nothing)."""
    from omniplane.plan.costs import CostTable
    from omniplane.plan.options import PlannerOptions
    from omniplane.plan.problem import make_problem

    policy = policy or workload.spec.slo
    opts = options or PlannerOptions()
    types = workload.model.type_names
    if overrides_ms and set(overrides_ms) >= set(types):
        return LatencyTargets(targets_ms=dict(overrides_ms), derived_from=None,
                              how=dict.fromkeys(overrides_ms, USER_TABLE))
    problem = make_problem(workload, gpu, gpus, samples=opts.mc_samples, seed=opts.seed)
    cost = cost or CostModel(workload.model)
    if runtime is not None and runtime != "ideal":
        from omniplane.plan.runtime import setup

        rt = setup(runtime, problem, cost, CostTable(problem, cost), opts.k_s, opts.seed)
        return space_targets(rt, policy, overrides_ms, seed=opts.seed)
    return resolve_targets(policy, CostTable(problem, cost), cost, overrides_ms, transfer_s, opts.seed)


def command_targets(choice: SLOChoice | None, workload: ResolvedWorkload, *, stored: LatencyTargets | None,
                    gpu: GPUKind | None, gpus: int | None, cost: CostModel | None = None,
                    where: str = "the plan file", runtime: str | None = None) -> tuple[LatencyTargets, str]:
    """The targets a command judges by (``sim run``, ``rehearse``, ``loadgen``) and one line saying
    where they come from. Base, in order: the ``--slo`` policy; ``--slo workload``; the plan's
    stored ``slo`` (the default when there is one, and ``--slo plan``; ``where`` names its
    holder); else the workload's policy, resolved as the planner would on GPU kind ``gpu`` and
    budget ``gpus``, in the plan space ``runtime`` (:func:`plan_runtime`). A user's
    ``TYPE=DURATION`` items replace single types on top."""
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
    got = targets_for(workload, gpu, gpus, policy, user, cost=cost, runtime=runtime)
    if given is not None:
        why = "--slo"
    else:
        why = f"workload {workload.spec.name!r}'s policy" + (f"; {where} has no slo" if choice.base is None
                                                             else "")
    return got, f"{got.describe()} resolved on {gpus} x {gpu.name} ({why})"


def plan_runtime(meta: Mapping[str, object] | None) -> str | None:
    """The plan space a plan was searched in (its ``meta.runtime.name``; None: not recorded)."""
    rt = (meta or {}).get("runtime")
    name = rt.get("name") if isinstance(rt, dict) else None
    return name if isinstance(name, str) else None


def plan_budget(plan: ResolvedPlan) -> int:
    """The GPU budget a plan was made for (its ``gpus``, else the GPUs it uses)."""
    return plan.spec.gpus or plan.spec.total_gpus


def target_array(targets: LatencyTargets, types: list[str]) -> np.ndarray:
    """Seconds in ``types`` order (inf: no target)."""
    sec = targets.seconds
    return np.array([sec.get(t, np.inf) for t in types])
