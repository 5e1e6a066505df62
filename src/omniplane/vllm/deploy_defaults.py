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

from omniplane.gpu.preprocess import class_table
from omniplane.perf import CostModel
from omniplane.perf.solo import SOLO_SAMPLES
from omniplane.sched.calibration import SLO_MULTIPLIER, gpu_rule, simulated_sm_sweep, sweep_ladder
from omniplane.sched.ladder import Ladder
from omniplane.slo.resolve import solo_targets
from omniplane.spec import GPUKind, ModelSpec, SoloMultiplierSLO
from omniplane.spec.slo import HORIZON_PERCENTILE

UNCALIBRATED = "uncalibrated: from the co-location model"


def solo_slo_table(model: ModelSpec, gpu: GPUKind, *, multiplier: float = SLO_MULTIPLIER,
                   n: int = SOLO_SAMPLES, seed: int = 0, cost: CostModel | None = None) -> dict[str, Any]:
    """The SLO table document (``kind: omniplane-slo-table``) for ``model`` on ``gpu`` (module
    docstring); ``load_slo_table`` reads it."""
    cost = cost or CostModel(model)  # what `omniplane perf solo` uses, so the source command reproduces it
    policy = SoloMultiplierSLO(multiplier=multiplier, percentile=HORIZON_PERCENTILE)
    targets, cfg = solo_targets(model, cost, gpu, policy, seed=seed, n=n)
    # the targets already carry the multiplier: the classes take them as they are
    classes, worst_of = class_table(model, {t: ms / 1e3 for t, ms in targets.targets_ms.items()}, 1.0)
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


def apply_calibration(config: dict[str, Any], cal: dict[str, Any], where: str = "deploy config") -> int:
    """Write a calibration (``omniplane calibrate``: :func:`omniplane.gpu.preprocess.derive`) into
    a deploy document from ``vllm-omni config``: every omniplane stage gets the calibrated ladder
    and SLO table, the shared stage ``B_sat`` (``policy_options.b_sat``) when one was measured.
    Returns the number of stages changed; ValueError when the GPU does not match or no stage runs
    omniplane's scheduler."""
    total = int(cal["ladder"]["total_sms"])
    changed = 0
    for i, stage in enumerate(config.get("stages") or []):
        om = ((stage or {}).get("additional_config") or {}).get("omniplane")
        if not isinstance(om, dict):
            continue
        if om.get("total_sms") not in (None, 0, total):
            raise ValueError(f"{where}: stages[{i}].additional_config.omniplane.total_sms: {om['total_sms']} "
                             f"SMs, the calibration's GPU has {total}")
        om["total_sms"] = total
        om["ladder"] = {"levels": list(cal["ladder"]["levels"]), "source": cal["ladder"]["source"]}
        om["slo_table"] = dict(cal["slo_table"])
        if om.get("role", "shared") == "shared" and cal.get("b_sat") is not None:
            om["policy_options"] = {**dict(om.get("policy_options") or {}), "b_sat": cal["b_sat"]}
        changed += 1
    if not changed:
        raise ValueError(f"{where}: stages: no stage has additional_config.omniplane (write it with "
                         "omniplane vllm-omni config)")
    return changed
