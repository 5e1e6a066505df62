"""Offline preprocessing (HorizonServe section 4.2): the SLO table, class profiles, SM ladder.

* **SLO table.** ``Delta_c = m_c x p95_solo(c)`` per request class, ``m_c = 5`` in the paper's
  experiments (section 6.1). ``p95_solo`` comes from the performance model
  (:mod:`omniplane.perf.solo`, every component on one GPU, one request at a time) or from a
  measured file (:func:`load_solo_p95`).
* **Class profiles** (:class:`~omniplane.sched.profiler.ClassProfile`) for ``r_hat``: the shared
  stage's per-token prefill and decode cost from the cost model, and the downstream time to
  first response = the class's solo latency at its mean work minus the shared stage's part.
* **S_cap** = the smallest SM count whose shared-stage decode time is within ``tolerance`` of
  the best in a fixed-SM sweep (the best is below the full-allocation degradation of section
  3.3, so the smallest near-best count is too). The sweep is simulated with the co-location
  model (:func:`simulated_sm_sweep`) or read from a real GPU sweep in the perf sweep format
  (:func:`sweep_from_file`, docs/reference/perf.md).
* **S_min** = the fewest SM count whose decode time is within ``S_MIN_SLOWDOWN`` (10%) of the
  sweep's best (the same sweep; the paper gives no rule for S_min).
* **Ladder**: ``levels`` counts evenly spaced in ``[S_min, S_cap]``, each a green-context
  partition of the GPU's compute capability (:mod:`omniplane.sched.ladder`, the builder the GPU
  backends use too); ``S_aggr`` (no downstream active) defaults to the whole GPU (Figure 7, t0:
  "shared stage exclusively uses all SMs").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omniplane.perf import ColocationModel, CostModel, ExecutorConfig
from omniplane.perf.solo import (
    CHUNK_TOKENS,
    SOLO_SAMPLES,
    chunked_prefill_time,
    default_solo_config,
    request_latency,
    solo_percentiles,
)
from omniplane.sched.ladder import Ladder, PartitionRule, partition_rule
from omniplane.sched.profiler import ClassProfile

# the fixed-SM sweep's rules live in smsweep (standard library only); re-exported here
from omniplane.sched.smsweep import (
    CAPACITY_FRACTION as CAPACITY_FRACTION,
)
from omniplane.sched.smsweep import (
    LADDER_LEVELS as LADDER_LEVELS,
)
from omniplane.sched.smsweep import (
    S_MIN_FRACTION as S_MIN_FRACTION,
)
from omniplane.sched.smsweep import (
    S_MIN_SLOWDOWN as S_MIN_SLOWDOWN,
)
from omniplane.sched.smsweep import (
    SCAP_TOLERANCE as SCAP_TOLERANCE,
)
from omniplane.sched.smsweep import (
    SweepPoint as SweepPoint,
)
from omniplane.sched.smsweep import (
    calibrated_ladder as calibrated_ladder,
)
from omniplane.sched.smsweep import (
    capacity_cap as capacity_cap,
)
from omniplane.sched.smsweep import (
    choose_s_cap as choose_s_cap,
)
from omniplane.sched.smsweep import (
    choose_s_min as choose_s_min,
)
from omniplane.sched.smsweep import (
    sweep_ladder as sweep_ladder,
)
from omniplane.spec import ComponentKind, GPUKind, ModelSpec, PathClass, compute_capability
from omniplane.spec.slo import HORIZON_MULTIPLIER, HORIZON_PERCENTILE
from omniplane.spec.work import mean_work
from omniplane.spec.yamlio import load_yaml

SLO_MULTIPLIER = HORIZON_MULTIPLIER  # section 6.1: "5x its isolated p95 first-response latency"
# assumption (from the perf sweep of Figure 4, data/horizonserve_fig4.json): decode batch 8 at
# 600 tokens of context per sequence for the simulated fixed-SM sweep
SWEEP_DECODE_BATCH = 8
SWEEP_CONTEXT_PER_SEQ = 600


@dataclass(frozen=True)
class SLOTable:
    """Per-class solo p95 first-response latency and the SLO multiplier."""

    p95_s: Mapping[str, float]
    multiplier: float = SLO_MULTIPLIER
    source: str = ""

    def __post_init__(self) -> None:
        if not self.p95_s:
            raise ValueError("SLOTable.p95_s must name at least one class")
        bad = {c: v for c, v in self.p95_s.items() if not v > 0.0}
        if bad:
            raise ValueError(f"SLOTable.p95_s: latencies must be > 0 s, got {bad}")
        if not self.multiplier > 0.0:
            raise ValueError(f"SLOTable.multiplier must be > 0, got {self.multiplier}")

    def slo_s(self, cls: str) -> float:
        p = self.p95_s.get(cls)
        if p is None:
            raise KeyError(f"no SLO for class {cls!r}; the table has {sorted(self.p95_s)}")
        return self.multiplier * p

    def as_dict(self) -> dict[str, float]:
        return {c: self.slo_s(c) for c in self.p95_s}


def slo_from_solo(model: ModelSpec, cost: CostModel, gpu: GPUKind, *, multiplier: float = SLO_MULTIPLIER,
                  n: int = SOLO_SAMPLES, seed: int = 0) -> SLOTable:
    """The SLO table from the performance model's solo p95 (:func:`omniplane.perf.solo.solo_percentiles`,
    the statistic the SLO resolver's ``solo_multiplier`` policy takes too, so both give one number)."""
    p95, cfg = solo_percentiles(model, cost, gpu, HORIZON_PERCENTILE, n=n, seed=seed)
    source = f"omniplane.perf.solo: {model.name} on {gpu.name} TP{cfg.tp}, {n} requests/class, seed {seed}"
    return SLOTable(p95, multiplier, source)


def load_solo_p95(path: Path, model: ModelSpec, *, multiplier: float = SLO_MULTIPLIER) -> SLOTable:
    """A measured SLO basis: JSON or YAML ``{"p95_ms": {CLASS: ms, ...}, "source": "..."}`` naming
    every request class of ``model``."""
    data = load_yaml(path, "solo p95 table")  # SpecError (a ValueError) naming the file
    if not isinstance(data, dict) or not isinstance(data.get("p95_ms"), dict):
        raise ValueError(f"{path}: p95_ms: expected a mapping of request class to milliseconds")
    p95: dict[str, float] = {}
    for cls, ms in data["p95_ms"].items():
        if not isinstance(ms, int | float) or isinstance(ms, bool) or not ms > 0:
            raise ValueError(f"{path}: p95_ms.{cls}: expected a positive number of milliseconds, got {ms!r}")
        p95[str(cls)] = float(ms) / 1e3
    missing = sorted(set(model.type_names) - set(p95))
    if missing:
        raise ValueError(f"{path}: p95_ms: missing request class(es) {missing} of {model.name}")
    unknown = sorted(set(p95) - set(model.type_names))
    if unknown:
        raise ValueError(f"{path}: p95_ms: unknown request class(es) {unknown}; {model.name} has "
                         f"{model.type_names}")
    return SLOTable(p95, multiplier, str(data.get("source", path)))


def class_profiles(model: ModelSpec, cost: CostModel, cfg: ExecutorConfig,
                   slo: SLOTable) -> dict[str, ClassProfile]:
    """Offline per-class profiles of the shared stage and the downstream stages (docstring)."""
    shared = model.shared_stage()
    if shared is None:
        raise ValueError(f"{model.name} has no shared LLM stage every request type passes through")
    cfgs = {c.name: cfg for c in model.components}
    out: dict[str, ClassProfile] = {}
    for t in model.type_names:
        rt = model.request_type(t)
        work = mean_work(model, t)
        prompt = max(2, round(work[shared]["prompt_tokens"]))
        outputs = work[shared]["output_tokens"]
        step = cost.prefill_time(shared, cfg, 1, 0)
        per_token = max(0.0, (cost.prefill_time(shared, cfg, prompt, 0) - step) / (prompt - 1))
        tpot = cost.decode_step_time(shared, cfg, 1, prompt)
        long = rt.path_class is PathClass.LONG
        decode_tokens, downstream = 0.0, 0.0
        if long:
            succ = next(e for e in model.component(shared).edges if e.to in rt.path)
            decode_tokens = 1.0 if succ.streaming else outputs
            encoders = sum(work[c]["items"] * model.cpu_seconds_per_item(c)
                           + cost.encoder_time(c, cfg, int(work[c]["items"]), work[c]["tokens"])
                           for c in rt.path if model.component(c).kind is ComponentKind.ENCODER)
            shared_done = (encoders + chunked_prefill_time(cost, shared, cfg, prompt, CHUNK_TOKENS)
                           + max(0.0, decode_tokens - 1.0) * tpot)
            downstream = max(0.0, request_latency(model, cost, cfgs, t, work) - shared_done)
        path = PathClass.LONG if long else PathClass.SHORT
        out[t] = ClassProfile(t, path, slo.slo_s(t), per_token, step, tpot, decode_tokens, downstream)
    return out


# ---- the SM ladder -----------------------------------------------------------------------------
def gpu_rule(gpu: GPUKind) -> PartitionRule:
    """The green-context partition rule of a catalog GPU kind (by its compute capability)."""
    return partition_rule(*compute_capability(gpu))


def simulated_sm_sweep(model: ModelSpec, cost: CostModel, gpu: GPUKind, *,
                       colocation: ColocationModel | None = None, rule: PartitionRule | None = None,
                       decode_batch: int = SWEEP_DECODE_BATCH,
                       context_per_seq: int = SWEEP_CONTEXT_PER_SEQ) -> tuple[SweepPoint, ...]:
    """A fixed-SM sweep of the shared stage's decode iteration from the co-location model, at
    every partition size of ``rule`` (default: the GPU's) and on the whole GPU."""
    shared = model.shared_stage()
    if shared is None:
        raise ValueError(f"{model.name} has no shared LLM stage")
    cfg = ExecutorConfig(gpu, 1, decode_batch)
    work = cost.llm_iteration_work(shared, cfg, decode_batch=decode_batch,
                                   decode_context=decode_batch * context_per_seq)
    colo = colocation or ColocationModel()
    eff = cost.efficiency(cfg)
    rule = rule or gpu_rule(gpu)
    counts = sorted({*range(rule.snap_up(rule.min_sms), gpu.sms + 1, rule.align), gpu.sms})
    return tuple(SweepPoint(s, colo.stage(work, gpu, s, eff=eff).time_s) for s in counts)


def sweep_from_file(path: Path, kernel: str = "decode") -> tuple[GPUKind, tuple[SweepPoint, ...]]:
    """A real fixed-SM sweep (perf sweep format): the solo (not co-running) ``kernel`` points."""
    from omniplane.perf.colocation_fit import parse_sweep, read_sweep_json

    sweep = parse_sweep(read_sweep_json(path), str(path))
    pts = tuple(SweepPoint(int(p.sms), p.time_ms / 1e3) for p in sweep.points
                if p.kernel == kernel and not p.corun and p.time_ms is not None)
    if len(pts) < 2:
        raise ValueError(f"{path}: points: need at least 2 solo '{kernel}' points with time_ms, "
                         f"got {len(pts)}")
    return sweep.gpu, tuple(sorted(pts, key=lambda p: p.sms))


@dataclass(frozen=True)
class OfflineCalibration:
    """Everything online serving looks up (section 4.2): SLO table, class profiles, SM ladder."""

    model: str
    gpu: str
    slo: SLOTable
    profiles: Mapping[str, ClassProfile]
    ladder: Ladder
    sweep: tuple[SweepPoint, ...] = ()
    sweep_source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model, "gpu": self.gpu,
            "slo_s": self.slo.as_dict(), "solo_p95_s": dict(self.slo.p95_s),
            "slo_multiplier": self.slo.multiplier, "slo_source": self.slo.source,
            "profiles": {c: {"path": p.path.value, "prefill_s_per_token": p.prefill_s_per_token,
                             "step_s": p.step_s, "decode_s_per_token": p.decode_s_per_token,
                             "decode_tokens": p.decode_tokens, "downstream_s": p.downstream_s}
                         for c, p in self.profiles.items()},
            "ladder": {"levels": list(self.ladder.levels), "s_aggr": self.ladder.s_aggr,
                       "s_total": self.ladder.s_total},
            "sweep": [{"sms": p.sms, "time_ms": p.time_s * 1e3} for p in self.sweep],
            "sweep_source": self.sweep_source,
        }


def calibrate(model: ModelSpec, gpu: GPUKind, cost: CostModel | None = None, *,
              slo: SLOTable | None = None, sweep_file: Path | None = None,
              colocation: ColocationModel | None = None, tolerance: float = SCAP_TOLERANCE,
              levels: int = LADDER_LEVELS, rule: PartitionRule | None = None,
              slowdown: float = S_MIN_SLOWDOWN) -> OfflineCalibration:
    """Offline preprocessing for one model-platform pair."""
    cost = cost or CostModel(model, runtime="vllm")  # HorizonServe runs on vLLM-Omni
    table = slo or slo_from_solo(model, cost, gpu)
    cfg = default_solo_config(model, cost, gpu)
    profiles = class_profiles(model, cost, cfg, table)
    if sweep_file is not None:
        sweep_gpu, sweep = sweep_from_file(sweep_file)
        if sweep_gpu.name != gpu.name:
            raise ValueError(f"{sweep_file}: gpu: the sweep is for {sweep_gpu.name}, calibrating {gpu.name}")
        source = str(sweep_file)
    else:
        sweep = simulated_sm_sweep(model, cost, gpu, colocation=colocation, rule=rule)
        source = (f"simulated: omniplane.perf.ColocationModel, decode batch {SWEEP_DECODE_BATCH} at "
                  f"{SWEEP_CONTEXT_PER_SEQ} tokens of context per sequence")
    ladder = sweep_ladder(sweep, gpu.sms, rule or gpu_rule(gpu), tolerance=tolerance, slowdown=slowdown,
                          levels=levels)
    return OfflineCalibration(model.name, gpu.name, table, profiles, ladder, sweep, source)
