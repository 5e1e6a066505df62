"""The whole space with exact pruning (omniplane.repro.exhaust): at cut 0 it is every plan of the
space; the bound it prunes by is admissible on the simulator; pruning never drops the best plan."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.plan.emit import to_spec
from omniplane.plan.enumerate import compound_subplans, logical_plans, simple_subplans
from omniplane.plan.flow import Candidates, exhaustive
from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner
from omniplane.plan.routing import routing_vectors
from omniplane.plan.select import bound_factor
from omniplane.repro.exhaust import WholeSpace, count_vectors
from tests.plan.conftest import problem


def _keys(cands: Candidates) -> set[tuple[object, ...]]:
    return {(cands.lp, tuple(cands.opt[i].tolist()), tuple(cands.cnt[i].tolist()),
             tuple(np.round(cands.p[cands.vec[i]], 9).ravel().tolist())) for i in range(len(cands))}


def test_count_vectors_are_every_vector_within_the_budget() -> None:
    cv = count_vectors((1, 2), 5)
    assert sorted(map(tuple, cv.tolist())) == [(1, 1), (1, 2), (2, 1), (3, 1)]
    assert len(count_vectors((4, 2), 5)) == 0


@pytest.mark.parametrize(("workload", "gpus"), [("qwen3-vl-servegen", 3), ("qwen-image-diffusiondb", 3)])
def test_at_cut_zero_the_space_is_every_plan_of_the_logical_plans(workload: str, gpus: int) -> None:
    """No groups, k_c = k_s = 1: exactly flow.exhaustive's plans (every config, count, vector)."""
    pb = problem(workload, gpus)
    planner = Planner(pb, options=PlannerOptions(k_c=1, k_s=1, mc_samples=32, sim_requests=50))
    ws = WholeSpace(planner.table, pb.pi(), gpus, 1, 1, 10, 121, groups=False)
    got: set[tuple[object, ...]] = set()
    for _, c in ws.plans(0.0):
        got |= _keys(c)
    want: set[tuple[object, ...]] = set()
    simple = simple_subplans(pb.model)
    for lp in logical_plans(simple + compound_subplans(pb.model, simple, 1), len(pb.types), 1):
        want |= _keys(exhaustive(lp, planner.table, routing_vectors(lp, 10, 121), pb.pi(), gpus))
    assert len(want) > 10
    assert got == want
    assert ws.tally.logical_pruned == 0


@pytest.mark.slow
def test_pruned_plans_simulate_below_the_cut_and_the_best_is_kept() -> None:
    """Small instance, compound subplans and executor groups in: simulate every plan; each one's
    simulated goodput is within its bound; every plan pruned at a cut simulates at or below it;
    the pruned enumeration still holds the best plan."""
    gpus = 2
    pb = problem("tiny", gpus)  # 273 logical plans (compound pairs in), 189 plans at a 0.25 grid
    opts = PlannerOptions(k_c=2, k_s=2, mc_samples=32, sim_requests=30, routing_step=0.25)
    planner = Planner(pb, options=opts)
    per_type = planner.simulator.arrival_factor()
    arrivals = np.array([per_type.get(t, 0.0) for t in pb.types])
    f = max(bound_factor("total", arrivals, pb.pi()), 1.0) * opts.alpha
    ws = WholeSpace(planner.table, pb.pi(), gpus, 2, 2, opts.grid_steps, opts.max_routings)
    sim: dict[tuple[object, ...], float] = {}
    kinds = set()
    for kind, c in ws.plans(0.0):
        kinds.add(kind)
        for i in range(len(c)):
            spec = to_spec(c, i, pb.model, pb.gpu.name, gpus, planner.transfer_s * 1e3)
            got = float(planner.simulator.run(spec, opts.alpha * float(c.rate[i])).goodput.sum())
            assert got <= f * float(c.rate[i]) * (1 + 1e-9)  # admissible
            (key,) = _keys(c.take(np.array([i])))
            sim[key] = got
    assert kinds == {"logical", "group"}
    assert len(sim) >= 20
    best = max(sim.values())
    cut = 0.9 * best
    kept: set[tuple[object, ...]] = set()
    pruned_ws = WholeSpace(planner.table, pb.pi(), gpus, 2, 2, opts.grid_steps, opts.max_routings)
    for _, c in pruned_ws.plans(cut / f):
        kept |= _keys(c)
    assert kept < set(sim)  # it prunes something, and builds nothing outside the space
    assert all(sim[k] <= cut for k in set(sim) - kept)
    assert max(sim[k] for k in kept) == best
