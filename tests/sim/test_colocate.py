"""Two stages on one GPU: time slicing, MPS-like sharing and an explicit SM split."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from omniplane.perf import CostModel
from omniplane.policy import FCFS, StepContext, StepDecision
from omniplane.sim.build import RunSetup, build_topology
from omniplane.sim.colocate import SharedGPU
from omniplane.sim.eventloop import EventLoop
from omniplane.sim.gpu import Colocated, TimeSliced
from omniplane.sim.simulator import Simulation
from omniplane.spec import PlanSpec, load_gpus, load_model, load_workload, parse, resolve_plan
from omniplane.spec.catalog import catalog_dir
from omniplane.workload import generate

PLAN = {
    "kind": "plan", "model": "qwen2.5-omni", "gpu": "RTX6000Ada", "transfer_ms": 0,
    "nodes": [
        {"name": "stage0", "components": ["vision_encoder", "audio_encoder", "thinker"],
         "executors": [{"count": 1, "tp": 1, "max_batch": 32}]},
        {"name": "stage1", "components": ["talker", "token2wav"],
         "executors": [{"count": 1, "tp": 1, "max_batch": 16}]},
    ],
    "routes": {t: [{"nodes": ["stage0"] + (["stage1"] if t.endswith("a") else []), "p": 1.0}]
               for t in ["t2t", "a2t", "i2t", "v2t", "t2a", "a2a", "i2a", "v2a"]},
}


@dataclass
class FixedCap(FCFS):
    """Caps the shared stage at ``cap`` SMs while the downstream holds work."""

    cap: int = 60
    seen: int = 0

    def decide(self, ctx: StepContext) -> StepDecision:
        self.seen += 1
        return StepDecision(sm_cap=self.cap if ctx.downstream_active else ctx.total_sms)


def _run(mode: str, policy: FCFS | None = None, *, trace: bool = False,
         colocation: object = None) -> tuple[Simulation, object]:
    model = load_model("qwen2.5-omni")
    plan = resolve_plan(parse(PlanSpec, PLAN), model, load_gpus())
    wl = load_workload(catalog_dir() / "workloads" / "qwen2.5-omni-horizon.yaml")
    reqs = generate(wl, n=40, rate=0.4, seed=2)
    cost = CostModel(model)
    loop = EventLoop()
    setup = RunSetup(policy_for=(lambda ex, c: policy if c == "thinker" else None),
                     shared_gpu=SharedGPU("stage0/0.0", ("stage1/0.0",), mode, colocation), trace=trace)
    topo = build_topology(model, plan.spec, plan.gpu, cost, loop, setup)
    sim = Simulation(model, topo, reqs, loop=loop)
    sim.run()
    assert topo.executors[0].gpu is topo.executors[1].gpu  # one GPU slot under both stages
    return sim, topo.executors[0].gpu


@pytest.mark.parametrize("mode", ["timeslice", "mps", "split"])
def test_every_mode_finishes_every_request(mode: str) -> None:
    sim, _ = _run(mode)
    assert sim.completed == len(sim.requests) == 40 and sim.n_failed == 0


def test_split_mode_applies_the_policy_cap_and_gives_the_rest_downstream() -> None:
    policy = FixedCap(cap=60)
    _, slot = _run("split", policy)
    assert isinstance(slot, Colocated) and policy.seen > 0
    caps = {sms for _, sms, _ in slot.log}
    assert caps <= {60, 142} and 60 in caps
    assert all(0.0 <= u <= 1.0 for _, _, u in slot.log)


def test_time_slicing_lets_the_stages_run_side_by_side_but_slower() -> None:
    """Without MPS one stage's host time is GPU time for the other: steps of the two stages
    overlap in time, and each stage's steps take at least their solo time."""
    sim, slot = _run("timeslice", trace=True)
    assert isinstance(slot, TimeSliced)
    s0, s1 = (ex.stats.trace or [] for ex in sim.topo.executors)
    assert s0 and s1
    overlap = sum(max(0.0, min(a1, b1) - max(a0, b0)) for a0, a1, *_ in s0 for b0, b1, *_ in s1
                  if a0 < b1 and b0 < a1)
    assert overlap > 0.0
    # a stage never runs faster than alone (a thinker decode iteration at batch 1 is the fastest
    # it has; a decode span of n iterations is one traced step)
    fastest = min((b - a) / n for a, b, comp, kind, _, n in s0 if comp == "thinker" and kind == "decode")
    cfg = sim.topo.executors[0].engines[0].cfg
    alone = CostModel(load_model("qwen2.5-omni")).llm_iteration_time(
        "thinker", cfg, prefill_tokens=0, prefill_context=0, prefill_requests=0, decode_batch=1,
        decode_context=1)
    assert fastest >= alone * (1 - 1e-9)


def test_split_mode_never_starves_a_downstream_step_behind_an_idle_full_gpu_cap() -> None:
    """A shared stage on the whole GPU while no downstream is active (HorizonServe's S_aggr =
    S_tot) must not leave the next downstream step on 1 SM while the shared stage is idle."""
    from types import SimpleNamespace

    from omniplane.sim.engines import Step

    gpu = load_gpus().get("RTX6000Ada")
    slot = Colocated("split", gpu, None, None, "s0")
    s0, s1 = SimpleNamespace(name="s0"), SimpleNamespace(name="s1")
    assert slot.sms_for(s0, Step(0.01, 1, "decode", sm_cap=gpu.sms)) == gpu.sms  # type: ignore[arg-type]
    # idle shared stage: the downstream step gets the GPU, not max(1, 0) SMs
    assert slot.sms_for(s1, Step(0.01, 1, "decode")) == gpu.sms  # type: ignore[arg-type]
    # while the shared stage runs a step, the complement applies as before
    assert slot.sms_for(s0, Step(0.01, 1, "decode", sm_cap=60)) == 60  # type: ignore[arg-type]
    slot.running["s0"] = 1e11
    assert slot.sms_for(s1, Step(0.01, 1, "decode")) == gpu.sms - 60  # type: ignore[arg-type]


class _CountingSignal:
    """A signal wrapper (as ``sched.memsignal.MemoryActivity``): the physics is ``inner``."""

    def __init__(self) -> None:
        from omniplane.perf import ColocationModel

        self.inner = ColocationModel()
        self.calls = 0

    def stage(self, *args: object, **kwargs: object) -> object:
        self.calls += 1
        return self.inner.stage(*args, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["mps", "split"])
def test_a_signal_wrapper_sees_one_call_per_step_and_the_re_timing_uses_the_physics(mode: str) -> None:
    """A windowed signal records each call as a step: re-timing must not call it again."""
    signal = _CountingSignal()
    sim, slot = _run(mode, colocation=signal)
    assert isinstance(slot, Colocated) and slot.physics is signal.inner
    steps = sum(ex.stats.steps for ex in sim.topo.executors)
    assert steps > 0 and signal.calls == steps
