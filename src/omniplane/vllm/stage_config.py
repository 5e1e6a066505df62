"""vLLM-Omni deploy configs (0.30 schema) that run omniplane's scheduler.

Start: the model's stock layout from the catalog (:mod:`omniplane.spec.layout`, vLLM-Omni
0.30.0's pipeline topology and deploy YAML), or a deploy YAML given as a file (``--stock``) with
the catalog's topology. The result is a deploy YAML vLLM-Omni loads with ``--deploy-config``:

- ``pipeline: omniplane_<model_type>``: vLLM-Omni's own pipeline for the model with omniplane's
  scheduler classes on its AR and generation stages (registered by omniplane's plugin,
  :mod:`omniplane.vllm.omni_pipelines`; in vLLM-Omni 0.30 a stage's ``scheduler_cls`` belongs to
  the topology, so a deploy YAML cannot set it directly);
- per wrapped stage: the scheduler settings (:mod:`omniplane.vllm.settings`) under
  ``additional_config.omniplane``: the comprehension stage (the one without inputs) is the shared
  stage (slot 0, the chosen policy), the other LLM stages are downstream (slots 1.., FCFS,
  publishing their activity, their requests' class fixed by the final output they lead to);
  ``stage_outputs`` maps vLLM-Omni's ``omni_final_stage_id`` to an output type, which is how
  stage 0 learns each request's class; ``enforce_eager`` (CUDA graphs are not captured per SM
  level); ``async_scheduling: false`` on AR stages (the policy decides each step from the last
  step's outcome; vLLM-Omni then picks its synchronous ``OmniARScheduler`` base);
- with a GPU kind: the SM count and compute capability for the SM ladder, and omniplane's worker
  classes (``worker_cls``), which apply the SM cap before each forward pass; with a ``ladder``
  (``ladder`` settings: ``levels`` and the ``source`` they come from) the same levels for every
  wrapped stage (the downstream stage holds the complements);
- without an SLO table the scheduler's default classes (HorizonServe's priorities, no deadlines);
- with ``single_gpu`` (HorizonServe's setting) every stage on device ``"0"`` and the stock memory
  fractions scaled to fit ``memory_budget`` together; :func:`size_memory` then replaces the
  fractions of every device's stages with ones sized from what each stage loads
  (:mod:`omniplane.perf.stage_memory`).

Diffusion stages keep their stock settings (their engine has no vLLM scheduler to wrap). The
``platforms`` overrides (NPU, XPU, ROCm) are kept as vLLM-Omni ships them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from omniplane.perf.stage_memory import Context, DeviceMemory, contexts, size_device
from omniplane.spec import GPUKind, ModelSpec, compute_capability
from omniplane.spec.layout import LayoutStage, VllmOmniLayout, layout_models
from omniplane.spec.load import load_layout
from omniplane.spec.yamlio import load_yaml
from omniplane.vllm.omni_pipelines import SCHEDULERS, pipeline_key
from omniplane.vllm.settings import DEFAULT_CLASSES, SloTable

WORKERS = {
    "llm_ar": "omniplane.vllm.omni_worker.OmniplaneARWorker",
    "llm_generation": "omniplane.vllm.omni_worker.OmniplaneGenerationWorker",
}


def layout_for(model: str) -> VllmOmniLayout:
    layout = load_layout(model)
    if layout is None:
        raise ValueError(
            f"no stock vLLM-Omni layout for {model!r} (catalog layouts: {', '.join(layout_models())})"
        )
    return layout


def stock_deploy(model: str, stock: Path | None = None) -> tuple[VllmOmniLayout, dict[str, Any], str]:
    """(layout, stock deploy document, where the deploy document came from)."""
    layout = layout_for(model)
    if stock is None:
        return layout, copy.deepcopy(layout.deploy), f"vLLM-Omni {layout.vllm_omni}: {layout.source}"
    data = load_yaml(stock, "vLLM-Omni deploy YAML")  # SpecError naming the file: missing, too large...
    if isinstance(data, dict) and "stage_args" in data:
        raise ValueError(
            f"{stock}: stage_args: this is vLLM-Omni's pre-0.2x stage config schema, which 0.30 removed; "
            "give a deploy YAML (top-level stages:, as in vllm_omni/deploy/)"
        )
    if not isinstance(data, dict) or not isinstance(data.get("stages", []), list):
        raise ValueError(f"{stock}: stages: expected a list of stage entries (a vLLM-Omni deploy YAML)")
    known = {s.stage_id for s in layout.stages}
    for i, d in enumerate(data.get("stages", [])):
        if not isinstance(d, dict) or d.get("stage_id") not in known:
            raise ValueError(
                f"{stock}: stages[{i}].stage_id: expected one of {sorted(known)} ({model}'s stages)"
            )
    return layout, data, str(stock)


def _final_outputs(layout: VllmOmniLayout, stage: LayoutStage) -> set[str]:
    """Output types of the final stages reachable from ``stage`` (itself included)."""
    reach = {stage.stage_id}
    for st in layout.stages:
        if any(i in reach for i in st.input_sources):
            reach.add(st.stage_id)
    return {st.final_output_type for st in layout.stages if st.stage_id in reach and st.final_output_type}


def omniplane_config(
    layout: VllmOmniLayout,
    deploy: dict[str, Any],
    slo: SloTable | None,
    *,
    policy: str = "fcfs",
    gpu: GPUKind | None = None,
    ladder: Mapping[str, Any] | None = None,
    control: str = "omniplane",
    single_gpu: bool = True,
    memory_budget: float = 0.9,
) -> dict[str, Any]:
    """The deploy document for ``layout`` with omniplane switched on (module docstring)."""
    if not 0 < memory_budget <= 1:
        raise ValueError(f"memory_budget must be in (0, 1], got {memory_budget}")
    wrapped = [st for st in layout.stages if st.execution in SCHEDULERS]
    if not wrapped:
        kinds = sorted({st.execution for st in layout.stages})
        raise ValueError(
            f"{layout.model}: vLLM-Omni runs it as {', '.join(kinds)} stages only; no stage with a vLLM "
            "scheduler for omniplane to wrap"
        )
    shared = next((st for st in wrapped if not st.input_sources), wrapped[0])
    downstream = [st for st in wrapped if st is not shared]
    out = {"pipeline": pipeline_key(layout.model_type), **copy.deepcopy(deploy)}
    by_id = {d["stage_id"]: d for d in out.get("stages", [])}
    stages = [by_id.get(st.stage_id, {"stage_id": st.stage_id}) for st in layout.stages]
    out["stages"] = stages
    if ladder is not None and gpu is None:
        raise ValueError("an SM ladder needs the GPU kind (its SM count and compute capability)")
    common: dict[str, Any] = {
        "control": control,
        "control_slots": 1 + max(1, len(downstream)),
        "total_sms": gpu.sms if gpu is not None else 0,
        "stage_outputs": {st.stage_id: st.final_output_type for st in layout.stages if st.final_output_type},
    }
    if slo is not None:  # without one the scheduler's default classes (no deadlines)
        common["slo_table"] = {
            "kind": slo.kind,
            "source": slo.source,
            "classes": {n: c.model_dump(mode="json") for n, c in slo.classes.items()},
        }
    if gpu is not None:  # the partition rule of the null ladder and of the scheduler's snapping
        common["compute_capability"] = "{}.{}".format(*compute_capability(gpu))
    if ladder is not None:  # the same levels for both roles: the downstream stage takes the complements
        common["ladder"] = dict(ladder)
    if single_gpu:
        total = sum(float(d.get("gpu_memory_utilization") or 0.0) for d in stages)
        scale = min(1.0, memory_budget / total) if total else 1.0
    for st, d in zip(layout.stages, stages, strict=True):
        if single_gpu:
            d["devices"] = "0"
            if d.get("gpu_memory_utilization") is not None:
                d["gpu_memory_utilization"] = round(float(d["gpu_memory_utilization"]) * scale, 3)
        if st not in wrapped:
            continue
        role = "shared" if st is shared else "downstream"
        settings = {
            **copy.deepcopy(common),
            "policy": policy if role == "shared" else "fcfs",
            "role": role,
            "slot": 0 if role == "shared" else 1 + downstream.index(st),
            "sampler": "auto" if role == "shared" else "null",
        }
        outputs = _final_outputs(layout, st)
        classes = slo.classes if slo is not None else DEFAULT_CLASSES
        if role == "downstream" and len(outputs) == 1 and next(iter(outputs)) in classes:
            # every request here leads to that output; vLLM-Omni passes downstream stages neither
            # a priority nor omni_final_stage_id, so the class comes from the topology
            settings["default_class"] = next(iter(outputs))
            settings["class_source"] = "metadata"
        d["enforce_eager"] = True
        if st.execution == "llm_ar":
            d["async_scheduling"] = False
        if gpu is not None:
            d["worker_cls"] = WORKERS[st.execution]
        d["additional_config"] = {**dict(d.get("additional_config") or {}), "omniplane": settings}
    return out


def workload_contexts(model: ModelSpec, workload: str | None = None, n: int = 2000,
                      seed: int = 0) -> tuple[dict[str, Context], str]:
    """(context per LLM component, the workload it comes from): ``n`` requests of ``workload``
    (a catalog name or file; default: the model's first catalog workload)."""
    from omniplane.spec import catalog_workload_paths, find_catalog_workload, load_workload
    from omniplane.workload.generate import generate

    if workload is None:
        paths = sorted(catalog_workload_paths(), key=lambda p: (len(p.stem), p.stem))
        found = [p for p in paths if p.stem.startswith(model.name)]
        wl = next((w for w in (load_workload(p) for p in found)
                   if w.model.name == model.name), None)
        if wl is None:  # assumption: 1k-token sequences (as perf.memory.MemoryPolicy.min_kv_tokens)
            llms = [c.name for c in model.components if c.is_llm]
            return ({c: Context(1024.0, 1024.0, 0) for c in llms},
                    "none in the catalog (assumption: 1,024-token sequences)")
    else:
        wl = load_workload(find_catalog_workload(workload) or Path(workload))
    return contexts(model, [r.work for r in generate(wl, n=n, seed=seed)]), wl.spec.name or str(wl.path)


def size_memory(config: dict[str, Any], layout: VllmOmniLayout, model: ModelSpec, gpu: GPUKind,
                ctx: dict[str, Context], stage_ids: list[int] | None = None) -> dict[str, DeviceMemory]:
    """Set ``gpu_memory_utilization`` of the deploy document's stages (those of ``stage_ids``;
    default all), sized per device (stages with the same ``devices``), and return the sizing
    per device. Raises :class:`omniplane.perf.stage_memory.StageMemoryError` (a ValueError) when
    a device's stages do not fit; the document is then left unchanged."""
    entries = [d for d in config.get("stages", []) if stage_ids is None or d["stage_id"] in stage_ids]
    by_dev: dict[str, list[dict[str, Any]]] = {}
    for d in entries:
        by_dev.setdefault(str(d.get("devices", "0")), []).append(d)
    sized = {dev: size_device(model, layout, group, gpu, ctx) for dev, group in by_dev.items()}
    for dev, group in by_dev.items():
        for d, st in zip(group, sized[dev].stages, strict=True):
            d["gpu_memory_utilization"] = st.utilization
    return sized


def dump_config(config: dict[str, Any], header: str) -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    return (
        "\n".join(lines) + "\n" + yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=110)
    )
