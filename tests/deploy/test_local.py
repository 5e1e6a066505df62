"""The emulated deployment against the simulator, in virtual time (exact), and its retries."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniplane.deploy import vtime
from omniplane.deploy.clock import VirtualClock
from omniplane.deploy.local import local_deployment, local_hosts, replay_local
from omniplane.deploy.stage import StageHost
from omniplane.loadgen.metrics import COMPLETED, Record, summarize
from omniplane.perf import CostModel
from omniplane.sim import simulate
from omniplane.spec import ResolvedPlan, ResolvedWorkload
from omniplane.workload import Request, generate


def _emulate(plan: ResolvedPlan, requests: list[Request], cost: CostModel, seed: int = 0) -> list[Record]:
    async def main() -> list[Record]:
        clock = VirtualClock.starting_now(1.0, asyncio.get_running_loop().time)
        orch, _ = local_deployment(plan, cost, clock, seed=seed)
        return await replay_local(orch, requests, clock)

    return vtime.run(main())


@pytest.mark.parametrize("plan_name,rate", [("small_plan", 2.0), ("small_plan", 5.0), ("catalog_plan", 12.0)])
def test_reproduces_the_simulator_request_by_request(
    plan_name: str, rate: float, workload: ResolvedWorkload, request: pytest.FixtureRequest
) -> None:
    """Driven in virtual time (timers fire exactly on time), the deployment's walk across nodes
    and the stage engines reproduce the simulator's first-response and end-to-end latency of
    every request: the two differ only by what real time adds."""
    plan: ResolvedPlan = request.getfixturevalue(plan_name)
    cost = CostModel(plan.model)
    reqs = generate(workload, duration_s=40, rate=rate, seed=3)
    sim = simulate(plan, reqs, cost).requests
    row = {int(r): i for i, r in enumerate(sim.rid)}
    latency, e2e = sim.latency(), sim.finish - sim.arrival
    records = _emulate(plan, reqs, cost)
    assert [r.status for r in records] == [COMPLETED] * len(reqs)
    for rec in records:
        i = row[rec.id]
        assert rec.first_response is not None and rec.end is not None
        assert rec.first_response - rec.start == pytest.approx(latency[i], abs=1e-9)
        assert rec.end - rec.start == pytest.approx(e2e[i], abs=1e-9)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), rate=st.floats(0.5, 8.0))
def test_goodput_equals_the_simulators(
    seed: int, rate: float, small_plan: ResolvedPlan, workload: ResolvedWorkload, cost: CostModel
) -> None:
    reqs = generate(workload, duration_s=15, rate=rate, seed=seed)
    slo = {t: 0.3 for t in small_plan.model.type_names}
    res = simulate(small_plan, reqs, cost, slo_s=slo)
    measured = summarize(_emulate(small_plan, reqs, cost), slo)
    assert measured["request_goodput"] == pytest.approx(res.goodput, rel=1e-9, abs=1e-12)


def test_a_killed_replica_loses_no_request(
    small_plan: ResolvedPlan, workload: ResolvedWorkload, cost: CostModel
) -> None:
    """Kill the thinker node's only replica mid-run (a fresh one replaces it): every session it
    held is re-opened and every request completes."""
    reqs = generate(workload, duration_s=20, rate=3.0, seed=1)

    async def main() -> tuple[list[Record], int, int]:
        clock = VirtualClock.starting_now(1.0, asyncio.get_running_loop().time)
        orch, transport = local_deployment(small_plan, cost, clock)
        run = asyncio.create_task(replay_local(orch, reqs, clock))
        await asyncio.sleep(10.0)
        fresh = local_hosts(small_plan, cost, clock)["front-g0"][0]
        held = transport.kill("front-g0", 0, fresh)
        return await run, held, orch.retries

    records, held, retries = vtime.run(main())
    assert held > 0, "the test needs sessions in flight at the kill"
    assert retries >= held
    assert [r.status for r in records] == [COMPLETED] * len(reqs)


def test_a_request_refused_by_the_engine_fails_visibly(small_plan: ResolvedPlan, cost: CostModel) -> None:
    """A prompt longer than the KV cache is refused (as vLLM does): an error, not a loss."""
    work = {
        "image_encoder": {"items": 1.0, "tokens": 100.0},
        "thinker": {"prompt_tokens": 1e9, "output_tokens": 10.0},
    }
    records = _emulate(small_plan, [Request(0, 0.0, "ti2t", work)], cost)
    assert records[0].status == "failed" and "KV capacity" in records[0].error


def test_stage_host_answers_false_for_unknown_sessions(small_plan: ResolvedPlan, cost: CostModel) -> None:
    from omniplane.deploy.messages import Released

    async def main() -> tuple[bool, bool]:
        clock = VirtualClock.starting_now(1.0, asyncio.get_running_loop().time)
        node = small_plan.spec.node("back")
        host = StageHost(
            small_plan.model, "back", node.components, node.executors[0], small_plan.gpu, cost, clock
        )
        return host.release(42, Released("talker", "thinker", 0.0)), host.upstream_done(42, "code2wav")

    assert vtime.run(main()) == (False, False)
