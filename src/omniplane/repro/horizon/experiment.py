"""HorizonServe's experiments (section 6) in simulation: one GPU, two co-located stages.

Setup (section 6.1): the shared stage (encoders + the shared LLM, "stage 0") and the downstream
stages ("stage 1") of a catalog model share one GPU; Poisson arrivals; short-path and long-path
classes mixed at a long-path fraction, each side spread evenly over its classes; SLO = 5 x solo
p95 per class. Two attainment figures per run, both in ``--json``:

* ``attainment`` (*drained*): requests meeting their class's first-response SLO over all
  arrived, the queues emptied after the last arrival (a backlog counts as misses);
* ``attainment_window`` (*windowed*, the paper's measure, section 6.1: each point runs for 15
  minutes and counts completed requests): requests whose first response came within the
  window ``[0, window_s]`` (``window_s`` = the point's arrival span, 900 s by default) and met
  the SLO, over the requests whose first response came within it (``completed_window``);
  requests still queued at the window's end are not counted.

Each LLM stage admits at most ``max_seqs`` sequences, vLLM's ``max_num_seqs``. The default is
vLLM-Omni's stock stage configuration, which HorizonServe uses as its runtime (section 6.1):
``runtime.max_batch_size: 1`` for every stage, passed on as ``engine_args["max_num_seqs"]``
(https://github.com/vllm-project/vllm-omni/blob/be81443c8a52f863452253ee6ea1d9f263bd2fb6/vllm_omni/model_executor/stage_configs/qwen2_5_omni.yaml
and vllm_omni/entrypoints/omni_stage.py at that commit, v0.12.0rc1; the paper's v0.16.0 is not
stored). Each point runs one Poisson stream of ``requests`` requests with the same seed for
every policy (common random numbers): ``rate x 900 s`` of arrivals (the paper runs each point
for 15 minutes), drained to the end.

The testbed's runtime, not the policies (section 6.1 runs every policy in one vLLM-Omni
runtime):

* **First audio** (``first_audio``): ``"chunk"`` (the default) measures a speech class's TTFO at
  its first audio chunk, the paper's definition (section 2.3: "TTFO for the first audio chunk";
  section 2.2: speech requests pass a talker and code2wav "before the first audio chunk is
  available"): the LLM -> vocoder edge streams (vLLM-Omni's async-chunk talker -> code2wav), so
  the first chunk is the talker's first codes through the vocoder, the simulator walk's
  first-response milestone. ``"whole"`` keeps the catalog model's whole-output hand-over (the
  first audio is the whole utterance). The SLO table is calibrated on the same model, so the
  rule (5 x solo p95) is the same for every class either way.
* **Chunked prefill** (``token_budget``): vLLM's ``max_num_batched_tokens`` default for the
  OpenAI server, by GPU memory (``EngineArgs.get_batch_defaults``: 8192 at >= 70 GiB, 2048
  below): 2048 on RTX 6000 Ada (48 GB), 8192 on RTX PRO 6000 (96 GB).
* **Serving runtime** (``runtime``): ``"vllm"`` (issue 13's fit) by default;
  ``vllm-omni-paper-testbed`` (:mod:`omniplane.repro.horizon.testbed`: the ``vllm`` runtime with its
  per-iteration host time fitted per GPU kind to Table 3's Vanilla TPOT) is opt-in, measured and
  not made the default: it contradicts Figure 4's memory signal
  (docs/decisions/0101-paper-testbed-host-time.md); ``vllm-omni-paper-bandwidth`` (the same
  module: the ``vllm`` runtime with the testbed's achieved DRAM bandwidth per GPU kind fitted to
  the same points) is opt-in too (docs/decisions/0102-paper-testbed-achieved-bandwidth.md), and
  ``vllm-omni-paper-dram`` (the same with the DRAM's capacity scaled too:
  ``testbed.ScaledDRAM``). ``calibration`` overrides the cost model's efficiency factors
  (the fit's trials).
* **Memory-activity signal**: NVML-style (:mod:`omniplane.sched.memsignal`), over NVML's past
  sample period (``signal_window_s``, default 1/6 s; ``None``: the step that starts, the
  one-step signal, docs/decisions/0104-one-step-memory-signal.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from omniplane.perf import CostModel
from omniplane.perf.factors import Calibration
from omniplane.perf.runtime import Runtime
from omniplane.repro.horizon.testbed import colocation_for, resolve
from omniplane.sched.calibration import OfflineCalibration, calibrate, capacity_cap
from omniplane.sched.factory import make_policy
from omniplane.sched.horizon import HorizonServe
from omniplane.sched.memsignal import NVML_SAMPLE_PERIOD_S, MemoryActivity
from omniplane.sim import EventLoop, RunSetup, SharedGPU, Simulation, build_topology
from omniplane.spec import (
    GeneratorKind,
    GPUKind,
    ModelSpec,
    PathClass,
    PlanSpec,
    ResolvedPlan,
    load_gpus,
    load_model,
    parse,
)
from omniplane.spec.load import resolve_workload
from omniplane.spec.workload import WorkloadSpec
from omniplane.workload import generate

MODELS = ("qwen2.5-omni", "mimo-audio", "bagel")
GPUS = {"rtx6000ada": "RTX6000Ada", "rtxpro6000": "RTXPRO6000"}
SWEEPS = ("rate", "long-fraction")
# Figure 8's axes: rates 0.2-0.5 at long fraction 0.3, long fractions 0.2-0.8 at rate 0.35
RATES = (0.2, 0.3, 0.4, 0.5)
LONG_FRACTIONS = (0.2, 0.4, 0.6, 0.8)
FIXED_LONG_FRACTION = 0.3  # section 6.2: the rate sweep's traffic mix
FIXED_RATE = 0.35  # Figure 8: the long-path sweep's offered load
FIG10_RATE, FIG10_LONG = 0.3, 0.4  # section 6.4: "lambda = 0.3 with 40% audio traffic"
STOCK_MAX_SEQS = 1  # vLLM-Omni stock stage configs (module docstring)
POINT_S = 900.0  # section 6.1: "runs each plotted point for 15 minutes" (of Poisson arrivals here)
FIRST_AUDIO = ("chunk", "whole")  # module docstring
GiB = 1024**3


def vllm_token_budget(gpu: GPUKind) -> int:
    """vLLM's default ``max_num_batched_tokens`` for the OpenAI server on ``gpu`` (vLLM
    ``EngineArgs.get_batch_defaults``: 8192 on GPUs with >= 70 GiB that are not an A100, else 2048)."""
    return 8192 if gpu.memory_bytes >= 70 * GiB and "a100" not in gpu.name.lower() else 2048


def first_audio_model(model: ModelSpec, first_audio: str) -> ModelSpec:
    """``model`` with its LLM -> vocoder edges streaming (``"chunk"``) or as catalogued (``"whole"``)."""
    if first_audio not in FIRST_AUDIO:
        raise ValueError(f"first_audio must be one of {FIRST_AUDIO}, got {first_audio!r}")
    if first_audio == "whole":
        return model
    vocoders = {c.name for c in model.components if c.generator is GeneratorKind.VOCODER}
    data = model.model_dump(mode="json", exclude_unset=True)
    changed = False
    for comp in data["components"]:
        if model.component(comp["name"]).is_llm:
            for edge in comp.get("edges", []):
                if edge["to"] in vocoders and not edge.get("streaming", False):
                    edge["streaming"], changed = True, True
    return parse(ModelSpec, data) if changed else model


@dataclass(frozen=True)
class RunResult:
    """One policy at one load point."""

    policy: str
    rate: float
    long_fraction: float
    arrived: int
    attainment: float
    attainment_by_class: dict[str, float]
    attainment_window: float  # met / completed within [0, window_s] (module docstring)
    completed_window: int
    window_s: float
    p95_ms: dict[str, float]
    shared_tpot_ms: dict[str, float]  # p50, p95 of the shared stage over all requests
    wall_s: float
    trace: list[tuple[float, int, float, float, int | None]] = field(default_factory=list, repr=False)
    # per executor (``stage0/0.0`` shared, ``stage1/...`` downstream): busy fraction of the run,
    # time-mean and max of the requests it holds (the simulator's executor summary)
    executors: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)


def deployment(model: ModelSpec, gpu: GPUKind) -> PlanSpec:
    """Stage 0 (encoders + shared LLM) and stage 1 (the rest) as plan nodes on one GPU kind."""
    shared = model.shared_stage()
    if shared is None:
        raise ValueError(f"{model.name} has no shared LLM stage")
    stage0 = [c.name for c in model.components
              if c.name == shared or any(e.to == shared for e in c.edges)]
    stage1 = [c.name for c in model.components if c.name not in stage0]

    def batch(hosts: list[str]) -> int:
        et = model.executor_type_for(hosts)
        allowed = sorted(et.max_batch) if et is not None else [16]
        return max([b for b in allowed if b <= 32] or allowed[:1])

    nodes = [{"name": name, "components": comps,
              "executors": [{"count": 1, "tp": 1, "max_batch": batch(comps)}]}
             for name, comps in (("stage0", stage0), ("stage1", stage1)) if comps]
    routes = {t: [{"nodes": ["stage0"] + (["stage1"] if set(model.path_of(t)) & set(stage1) else []),
                   "p": 1.0}] for t in model.type_names}
    return parse(PlanSpec, {"kind": "plan", "model": model.name, "gpu": gpu.name, "transfer_ms": 0,
                            "nodes": nodes, "routes": routes})


def mix_for(model: ModelSpec, long_fraction: float) -> dict[str, float]:
    """Long-path fraction spread evenly over the long classes, the rest over the short ones."""
    if not 0.0 <= long_fraction <= 1.0:
        raise ValueError(f"long_fraction must be in [0, 1], got {long_fraction}")
    longs = [r.name for r in model.request_types if r.path_class is PathClass.LONG]
    shorts = [r.name for r in model.request_types if r.path_class is PathClass.SHORT]
    mix = {t: (1.0 - long_fraction) / len(shorts) for t in shorts}
    mix.update({t: long_fraction / len(longs) for t in longs})
    return mix


class SingleGPU:
    """One model on one GPU kind, calibrated once; runs any policy at any load point."""

    def __init__(self, model: str, gpu: str, *, max_seqs: int = STOCK_MAX_SEQS,
                 sm_sweep: Path | None = None, first_audio: str = "chunk",
                 token_budget: int | None = None,
                 signal_window_s: float | None = NVML_SAMPLE_PERIOD_S,
                 runtime: str | Runtime = "vllm", calibration: Calibration | None = None) -> None:
        """``sm_sweep``: a real fixed-SM sweep (perf sweep format) for S_cap instead of the
        co-location model's; ``first_audio``, ``token_budget`` (default: vLLM's for the GPU),
        ``signal_window_s``, ``runtime`` and ``calibration``: the module docstring."""
        if signal_window_s is not None and not signal_window_s > 0:
            raise ValueError(f"signal_window_s must be > 0 seconds or None, got {signal_window_s}")
        self.signal_window_s = signal_window_s
        if max_seqs < 1:
            raise ValueError(f"max_seqs must be >= 1, got {max_seqs}")
        self.model = first_audio_model(load_model(model), first_audio)
        self.first_audio = first_audio
        self.gpu = load_gpus().get(GPUS.get(gpu, gpu))
        self.token_budget = vllm_token_budget(self.gpu) if token_budget is None else token_budget
        if self.token_budget < 1:
            raise ValueError(f"token_budget must be >= 1, got {self.token_budget}")
        rt, cal = resolve(runtime)  # a testbed name -> its runtime and (bandwidth) calibration
        self.cost = CostModel(self.model, runtime=rt, calibration=calibration or cal)  # on vLLM-Omni
        self.colocation = colocation_for(runtime)  # None: the shipped co-location model
        self.calibration: OfflineCalibration = calibrate(self.model, self.gpu, self.cost, sweep_file=sm_sweep,
                                                         colocation=self.colocation)
        self.plan = deployment(self.model, self.gpu)
        self.resolved = ResolvedPlan(self.plan, self.model, self.gpu, None)
        self.downstream = tuple(f"{n.name}/{gi}.{k}" for n in self.plan.nodes if n.name != "stage0"
                                for gi, g in enumerate(n.executors) for k in range(g.count))
        self.max_seqs = max_seqs
        self.shared = self.model.shared_stage() or ""

    def requests(self, rate: float, long_fraction: float, n: int, seed: int) -> list[Any]:
        spec = parse(WorkloadSpec, {
            "kind": "workload", "name": f"{self.model.name}-horizon", "model": self.model.name,
            "mix": mix_for(self.model, long_fraction), "arrival": {"process": "poisson", "rate": rate},
            "slo": {"policy": "solo_multiplier", "multiplier": self.calibration.slo.multiplier,
                    "percentile": 95},
            "seed": seed})
        return generate(resolve_workload(spec, self.model), n=n, seed=seed)

    def run(self, policy_name: str, rate: float, long_fraction: float, n: int, seed: int = 0, *,
            record: bool = False, window_s: float | None = None) -> RunResult:
        """One drained run; ``window_s`` (default ``n / rate``) bounds the windowed figure."""
        cal = self.calibration
        policy, mode = make_policy(policy_name, cal.profiles, cal.ladder, record=record,
                                   static_cap=capacity_cap(cal.sweep) if cal.sweep else None)
        loop = EventLoop()
        signal = None
        if mode != "timeslice":
            signal = (MemoryActivity(self.colocation) if self.signal_window_s is None else
                      MemoryActivity(self.colocation, window_s=self.signal_window_s, clock=lambda: loop.now))
        setup = RunSetup(
            policy_for=lambda ex, c: policy if c == self.shared else None,
            max_seqs=self.max_seqs,  # vLLM max_num_seqs of every LLM stage
            token_budget=self.token_budget,  # vLLM max_num_batched_tokens (chunked prefill)
            shared_gpu=SharedGPU("stage0/0.0", self.downstream, mode, signal),
        )
        slo = self.calibration.slo.as_dict()
        requests = self.requests(rate, long_fraction, n, seed)
        t0 = time.perf_counter()
        rp = self.resolved
        topo = build_topology(rp.model, rp.spec, rp.gpu, self.cost, loop, setup)
        res = Simulation(rp.model, topo, requests, loop=loop, slo_s=slo).run()
        wall = time.perf_counter() - t0
        tp = res.requests.tpot[self.shared]
        tpot = tp[~np.isnan(tp)] * 1e3
        window = n / rate if window_s is None else window_s
        rec = res.requests
        first = rec.first_response
        inside = ~np.isnan(first) & (first <= window)
        target = np.array([slo.get(str(t), math.inf) for t in rec.type], dtype=float)
        done = int(inside.sum())
        met = int((inside & (first - rec.arrival <= target)).sum())
        trace: list[tuple[float, int, float, float, int | None]] = []
        if record and isinstance(policy, HorizonServe) and policy.history is not None:
            trace = [(h.now, h.downstream_active, h.bw_util, h.spatial.pressure, h.spatial.sm_shared)
                     for h in policy.history]
        return RunResult(
            policy_name, rate, long_fraction, res.arrived, float(res.attainment or 0.0),
            {t: float(m.attainment or 0.0) for t, m in res.per_type.items()},
            met / done if done else 0.0, done, window,
            {t: float(m.latency_ms["p95"] or math.nan) for t, m in res.per_type.items()},
            {"p50": float(np.percentile(tpot, 50)) if len(tpot) else math.nan,
             "p95": float(np.percentile(tpot, 95)) if len(tpot) else math.nan},
            wall, trace,
            {name: {k: float(e[k]) for k in ("utilisation", "queue_mean", "queue_max")}
             for name, e in res.executors.items()})


# ---- sweeps ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepSpec:
    model: str
    gpu: str
    sweep: str
    xs: tuple[float, ...]
    policies: tuple[str, ...]
    duration_s: float = POINT_S
    requests: int | None = None  # a fixed count per point instead of duration_s x rate
    seed: int = 0
    max_seqs: int = STOCK_MAX_SEQS
    sm_sweep: str | None = None  # a real fixed-SM sweep file for S_cap
    first_audio: str = "chunk"  # module docstring
    token_budget: int | None = None  # None: vLLM's default for the GPU

    def __post_init__(self) -> None:
        if self.first_audio not in FIRST_AUDIO:
            raise ValueError(f"first_audio must be one of {FIRST_AUDIO}, got {self.first_audio!r}")
        if self.sweep not in SWEEPS:
            raise ValueError(f"sweep must be one of {SWEEPS}, got {self.sweep!r}")
        if not self.xs or not self.policies:
            raise ValueError("a sweep needs at least one x value and one policy")
        if self.requests is not None and self.requests < 10:
            raise ValueError(f"requests per point must be >= 10, got {self.requests}")
        if not self.duration_s > 0:
            raise ValueError(f"duration_s must be > 0, got {self.duration_s}")

    def point(self, x: float) -> tuple[float, float]:
        """(rate, long fraction) of the point at ``x``."""
        return (x, FIXED_LONG_FRACTION) if self.sweep == "rate" else (FIXED_RATE, x)

    def n_requests(self, rate: float) -> int:
        return self.requests if self.requests is not None else max(10, round(rate * self.duration_s))


@lru_cache(maxsize=4)
def single_gpu(model: str, gpu: str, max_seqs: int, sm_sweep: str | None = None,
               first_audio: str = "chunk", token_budget: int | None = None,
               runtime: str = "vllm") -> SingleGPU:
    """One calibrated testbed per process and configuration (worker processes build their own)."""
    return SingleGPU(model, gpu, max_seqs=max_seqs, sm_sweep=Path(sm_sweep) if sm_sweep else None,
                     first_audio=first_audio, token_budget=token_budget, runtime=runtime)


def _run_point(args: tuple[SweepSpec, str, float]) -> RunResult:
    spec, policy, x = args
    rate, frac = spec.point(x)
    testbed = single_gpu(spec.model, spec.gpu, spec.max_seqs, spec.sm_sweep, spec.first_audio,
                         spec.token_budget)
    n = spec.n_requests(rate)
    window = spec.duration_s if spec.requests is None else n / rate
    return testbed.run(policy, rate, frac, n, spec.seed, window_s=window)


def run_sweep(spec: SweepSpec, *, jobs: int = 1, progress: Any = None,
              done: Mapping[tuple[str, float], RunResult] | None = None,
              on_result: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    """Every policy at every x; ``jobs`` worker processes (results in policy, x order).

    ``done`` holds results already computed (a resumed sweep), keyed by (policy, x): those points
    are not run again. ``on_result`` is called with each newly finished result as it finishes,
    ``progress`` (no arguments) after it."""
    done = done or {}
    tasks = [(spec, p, x) for p in spec.policies for x in spec.xs if (p, x) not in done]
    fresh: dict[tuple[str, float], RunResult] = {}

    def finished(task: tuple[SweepSpec, str, float], r: RunResult) -> None:
        fresh[(task[1], task[2])] = r
        if on_result is not None:
            on_result(r)
        if progress is not None:
            progress()

    if jobs <= 1 or len(tasks) <= 1:
        for t in tasks:
            finished(t, _run_point(t))
    else:
        from contextlib import closing

        from omniplane.parallel import map_processes

        # workers terminated at once on Ctrl-C / SIGTERM or an error (a plain pool waits for all)
        with closing(map_processes(_run_point, tasks, jobs)) as results:
            for t, r in results:
                finished(t, r)
    return [done[(p, x)] if (p, x) in done else fresh[(p, x)] for p in spec.policies for x in spec.xs]


def sweep_json(spec: SweepSpec, results: Sequence[RunResult]) -> dict[str, Any]:
    """``{"policies": {NAME: {"x", "attainment", "attainment_window", "completed_window",
    "p95_ms": {CLASS: [...]}}}, ...}`` (``attainment``: drained; see the module docstring)."""
    policies: dict[str, Any] = {}
    for name in spec.policies:
        rs = [r for r in results if r.policy == name]
        classes = sorted({c for r in rs for c in r.p95_ms})
        policies[name] = {"x": list(spec.xs), "attainment": [r.attainment for r in rs],
                          "attainment_window": [r.attainment_window for r in rs],
                          "completed_window": [r.completed_window for r in rs],
                          "p95_ms": {c: [r.p95_ms.get(c, math.nan) for r in rs] for c in classes}}
    return {"policies": policies}


# ---- Figure 10: the spatial loop over time --------------------------------------------------
@dataclass(frozen=True)
class ControlTrace:
    """HorizonServe's per-step signals in one run (Figure 10)."""

    rate: float
    long_fraction: float
    t: tuple[float, ...]
    downstream: tuple[int, ...]  # requests held by the downstream stage
    bw_util: tuple[float, ...]  # the raw memory-activity sample B(t)
    pressure: tuple[float, ...]  # B_hat(t)
    sm_cap: tuple[int, ...]

    def correlation(self, co_running_only: bool = False) -> float:
        """Pearson correlation of ``B_hat`` and the selected cap (the paper reports 0.926)."""
        keep = [i for i, a in enumerate(self.downstream) if a > 0 or not co_running_only]
        if len(keep) < 3:
            return math.nan
        x = np.asarray([self.pressure[i] for i in keep])
        y = np.asarray([self.sm_cap[i] for i in keep], dtype=float)
        if x.std() == 0.0 or y.std() == 0.0:
            return math.nan
        return float(np.corrcoef(x, y)[0, 1])

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.rate, "long_fraction": self.long_fraction, "steps": len(self.t),
                "correlation": self.correlation(), "correlation_co_running": self.correlation(True),
                "co_running_fraction": float(np.mean([a > 0 for a in self.downstream])) if self.t else 0.0,
                "sm_caps": sorted(set(self.sm_cap))}


def control_trace(testbed: SingleGPU, requests: int, seed: int = 0, rate: float = FIG10_RATE,
                  long_fraction: float = FIG10_LONG) -> ControlTrace:
    r = testbed.run("horizon", rate, long_fraction, requests, seed, record=True)
    rows = [row for row in r.trace if row[4] is not None]
    return ControlTrace(rate, long_fraction, tuple(x[0] for x in rows), tuple(x[1] for x in rows),
                        tuple(x[2] for x in rows), tuple(x[3] for x in rows),
                        tuple(int(x[4] or 0) for x in rows))
