"""``omniplane calibrate --run``: the section 4.2 measurements on this machine's GPU, through the
GPU backend (:func:`omniplane.gpu.backends.make_streams`: green contexts of every partition the
GPU allows, the shared stage's and the downstream stage's complementary SMs), or with ``dry``
on no GPU at all (:class:`~omniplane.gpu.sweep.FakeBench`: synthetic latencies, marked so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omniplane.gpu.sweep import SOLO_REQUESTS, Bench, FakeBench, measure
from omniplane.sched.calibration import gpu_rule
from omniplane.sched.ladder import LadderSpec, partition_rule
from omniplane.spec import GPUKind, ModelSpec

SWEEP = LadderSpec()  # every partition: the smallest to the largest that leaves the other stage one


def model_shapes(model: ModelSpec) -> dict[str, Any]:
    """The shared stage and its first downstream LLM stage at their catalog sizes (``size:`` of the
    model's components, from the model's config.json) plus each request type's median work."""
    shared = model.shared_stage()
    if shared is None:
        raise ValueError(f"{model.name} has no shared LLM stage to calibrate")
    succ = [e.to for e in model.component(shared).edges]
    if not succ:
        raise ValueError(f"{model.name}: the shared stage {shared} has no downstream stage")
    keys = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab")

    def size(name: str) -> dict[str, Any]:
        s = model.component(name).size
        got = {k: getattr(s, k, None) for k in keys}
        missing = [k for k, v in got.items() if v is None and k != "head_dim"]
        if missing:
            raise ValueError(f"{model.name}: components.{name}.size: missing {missing} (needed to build the "
                             "stage at its true shape)")
        return {"name": name, **got}

    return {"shared": size(shared), "downstream": size(succ[0])}


def run_local(model: ModelSpec, *, gpu: GPUKind | None, device: int = 0, dry: bool = False,
              solo_requests: int = SOLO_REQUESTS,
              log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """The calibration document of ``model`` on this machine (module docstring); GpuUnavailable
    (saying why) when not ``dry`` and no green-context backend works here."""
    from omniplane.gpu.backends import make_streams
    from omniplane.gpu.green import NullStreams

    types = {t: model.request_type(t).output.value for t in model.type_names}
    bench: Bench
    if dry:
        if gpu is None:
            raise ValueError("--dry needs --gpu (the SM count and compute capability to sweep)")
        rule = gpu_rule(gpu)
        why = "--dry: no GPU used"
        shared: Any = NullStreams(gpu.sms, rule, SWEEP, role="shared", reason=why)
        down: Any = NullStreams(gpu.sms, rule, SWEEP, role="downstream", reason=why)
        bench = FakeBench(gpu.sms, types)
        name = f"none (dry run, {gpu.name} assumed: {gpu.sms} SMs)"
    else:
        rule = gpu_rule(gpu) if gpu is not None else partition_rule(9, 0)  # real backends read the device's
        shared = make_streams("auto", SWEEP, role="shared", device=device, total_sms=0, rule=rule)
        down = make_streams("auto", SWEEP, role="downstream", device=device, total_sms=0, rule=rule)
        from omniplane.gpu.backends import make_sampler
        from omniplane.gpu.torchbench import TorchBench

        sampler = make_sampler("auto", device=device, min_interval_s=0.1)
        tb = TorchBench(model_shapes(model), work_from_model(model), device=device,
                        sampler=sampler if sampler.source != "null" else None)
        bench, name = tb, tb.device_name
        gpu = gpu or catalog_kind(name, shared.ladder.total_sms)
    return measure(bench, shared, down, model=model.name, gpu=gpu.name if gpu else None, device=name,
                   types=types, solo_requests=solo_requests, log=log)


def catalog_kind(device_name: str, sms: int) -> GPUKind | None:
    """The catalog GPU kind whose name or alias is in the device's name and whose SM count
    matches (None if none does)."""
    from omniplane.spec import catalog_gpus_path, load_gpus

    name = device_name.lower().replace(" ", "").replace("-", "")
    for kind in load_gpus(catalog_gpus_path()).gpus:
        keys = [kind.name, *getattr(kind, "aliases", [])]
        if kind.sms == sms and any(k.lower().replace(" ", "").replace("-", "") in name for k in keys):
            return kind
    return None


def work_from_model(model: ModelSpec) -> dict[str, dict[str, Any]]:
    """Per request type: the shared stage's prompt and output tokens (the means of the catalog's
    distributions, encoder tokens included in the prompt), the downstream stage's output tokens
    and whether the path continues downstream."""
    from omniplane.spec.work import mean_work

    shared = model.shared_stage()
    if shared is None:
        raise ValueError(f"{model.name} has no shared LLM stage to calibrate")
    out: dict[str, dict[str, Any]] = {}
    for t in model.type_names:
        rt = model.request_type(t)
        work = mean_work(model, t)
        long = [c for c in rt.path if c != shared and model.component(c).kind.value == "llm"]
        out[t] = {
            "output": rt.output.value,
            "prompt_tokens": round(work[shared]["prompt_tokens"]),
            "output_tokens": round(work[shared]["output_tokens"]),
            "down_tokens": round(work[long[0]]["output_tokens"]) if long else 0,
        }
    return out
