"""What ``omniplane vllm-omni config`` writes for HorizonServe when the user gives only a GPU:
an SLO table from the performance model's solo latencies and an SM ladder the GPU can realise.

* **SLO table** (the ``omniplane-slo-table`` document of :mod:`omniplane.vllm.settings`): one
  class per output modality of the model's request types (``text``, ``audio``, ``image``: the
  classes vLLM-Omni's ``final_output_type`` names, HorizonServe section 5), with the request
  types' vLLM ``priority`` and path class, and ``slo_s = 5 x solo p95`` (HorizonServe section
  6.1): the ``solo_multiplier`` policy's per-type targets from the one SLO resolver
  (:func:`omniplane.slo.resolve.solo_targets`: the solo p95 ``omniplane perf solo MODEL --gpu
  GPU`` prints, every component on one GPU, one request at a time); a class holding
  several request types takes the largest p95 of them, so each of its types gets at least 5x
  its own solo p95. The table's ``source`` says all this: it is derived, not measured.
* **Ladder**: :func:`omniplane.sched.calibration.sweep_ladder` over a fixed-SM sweep of the
  shared stage's decode simulated by the co-location model
  (:func:`~omniplane.sched.calibration.simulated_sm_sweep`), on the partitions the GPU's compute
  capability allows (:func:`omniplane.sched.ladder.partition_rule`: on 9.0, H100/H200 with 132
  SMs, groups of 8 SMs, at least 8; the CUDA driver API's green-context guideline,
  :data:`omniplane.sched.ladder.RULES_SOURCE`). ``S_cap`` is therefore the co-location model's
  until a GPU sweep calibrates it (``omniplane calibrate --from``); the ladder's ``source`` says
  ``uncalibrated: from the co-location model``.

Both need the performance model, so only the command line imports this module; the vLLM
processes read the written values.
"""

from __future__ import annotations

from typing import Any

from omniplane.perf import CostModel
from omniplane.perf.solo import SOLO_SAMPLES
from omniplane.sched.calibration import SLO_MULTIPLIER, gpu_rule, simulated_sm_sweep, sweep_ladder
from omniplane.sched.ladder import Ladder
from omniplane.slo.resolve import solo_targets
from omniplane.spec import GPUKind, ModelSpec, PathClass, SoloMultiplierSLO
from omniplane.spec.slo import HORIZON_PERCENTILE

UNCALIBRATED = "uncalibrated: from the co-location model"


def solo_slo_table(model: ModelSpec, gpu: GPUKind, *, multiplier: float = SLO_MULTIPLIER,
                   n: int = SOLO_SAMPLES, seed: int = 0, cost: CostModel | None = None) -> dict[str, Any]:
    """The SLO table document (``kind: omniplane-slo-table``) for ``model`` on ``gpu`` (module
    docstring); ``load_slo_table`` reads it."""
    cost = cost or CostModel(model)  # what `omniplane perf solo` uses, so the source command reproduces it
    policy = SoloMultiplierSLO(multiplier=multiplier, percentile=HORIZON_PERCENTILE)
    targets, cfg = solo_targets(model, cost, gpu, policy, seed=seed, n=n)
    slo_s = {t: ms / 1e3 for t, ms in targets.targets_ms.items()}
    members: dict[str, list[str]] = {}
    for t in model.type_names:
        members.setdefault(model.request_type(t).output.value, []).append(t)
    classes: dict[str, dict[str, Any]] = {}
    for cls, types in members.items():
        rts = [model.request_type(t) for t in types]
        prios = {rt.priority for rt in rts if rt.priority is not None}
        if len(prios) > 1:
            raise ValueError(f"{model.name}: request types {types} (output {cls}) carry different vLLM "
                             f"priorities {sorted(prios)}; one class needs one priority")
        long = any(rt.path_class is PathClass.LONG for rt in rts)
        worst = max(types, key=slo_s.__getitem__)
        classes[cls] = {
            "priority": prios.pop() if prios else None,
            "path": (PathClass.LONG if long else PathClass.SHORT).value,
            "slo_s": round(slo_s[worst], 4),
        }
    missing = [c for c, v in classes.items() if v["priority"] is None]
    if missing:
        raise ValueError(f"{model.name}: no vLLM priority for the request types of class(es) {missing} "
                         "(set priority: in the model's request_types)")
    worst_of = {c: max(ts, key=slo_s.__getitem__) for c, ts in members.items()}
    detail = "; ".join(f"{c}: {multiplier:g} x {t} {targets.targets_ms[t] / multiplier:.1f} ms"
                       for c, t in worst_of.items())
    source = (f"derived: {multiplier:g} x solo p{HORIZON_PERCENTILE:g} (HorizonServe section 6.1) "
              f"from the performance model (omniplane perf solo {model.name} --gpu {gpu.name}: "
              f"TP{cfg.tp}, {n} requests per type, seed {seed}), per class the largest p95 of its request "
              f"types ({detail}); not measured: replace with solo p95 measured on the GPU")
    return {"kind": "omniplane-slo-table", "source": source, "classes": classes}


def model_ladder(model: ModelSpec, gpu: GPUKind, *, cost: CostModel | None = None) -> tuple[Ladder, str]:
    """(ladder, where it comes from) for ``model``'s shared stage on ``gpu`` (module docstring)."""
    cost = cost or CostModel(model)
    rule = gpu_rule(gpu)  # KeyError naming the GPU kind when its entry has no compute capability
    sweep = simulated_sm_sweep(model, cost, gpu, rule=rule)
    ladder = sweep_ladder(sweep, gpu.sms, rule)
    source = (f"{UNCALIBRATED} (omniplane.perf.ColocationModel's fixed-SM sweep of {model.shared_stage()}'s "
              f"decode on {gpu.name}, {gpu.sms} SMs, compute capability {gpu.compute_capability}: partitions "
              f"of at least {rule.min_sms} SMs in multiples of {rule.align}, {rule.source}); calibrate "
              "S_cap with a GPU sweep (omniplane calibrate --from)")
    return ladder, source
