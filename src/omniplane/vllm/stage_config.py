"""vLLM-Omni stage configs with omniplane's scheduler and worker classes filled in.

Starting point, in order: a stock stage config given as a file; the one bundled with an
installed vLLM-Omni (read as a file: vLLM-Omni need not import); omniplane's copy of the stock
layout (:data:`LAYOUTS`, transcribed from vLLM-Omni 0.16.0, see :data:`LAYOUT_SOURCES`).

For every LLM stage the result sets ``scheduler_cls`` and ``worker_cls`` to omniplane's
classes, keeps ``worker_type``, runs the stage eagerly (``enforce_eager``: CUDA graphs are not
captured per SM level), and puts the scheduler settings (:mod:`omniplane.vllm.settings`) under
``engine_args.additional_config.omniplane``: the comprehension stage (``is_comprehension``) is
the shared stage (slot 0, the chosen policy), the other LLM stages are downstream (slots 1..,
FCFS, publishing their activity). With ``single_gpu`` (HorizonServe's setting) every stage gets
device ``"0"`` and the stock memory fractions are scaled to fit ``memory_budget`` together.
Diffusion stages keep their stock settings (their engine has no vLLM scheduler to wrap).
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import yaml

from omniplane.spec import GPUKind, compute_capability
from omniplane.vllm.settings import SloTable

SCHEDULERS = {
    "ar": "omniplane.vllm.omni_scheduler.OmniplaneOmniARScheduler",
    "generation": "omniplane.vllm.omni_scheduler.OmniplaneOmniGenerationScheduler",
}
WORKERS = {
    "ar": "omniplane.vllm.omni_worker.OmniplaneARWorker",
    "generation": "omniplane.vllm.omni_worker.OmniplaneGenerationWorker",
}
STOCK_SCHEDULERS = {
    "vllm_omni.core.sched.omni_ar_scheduler.OmniARScheduler": "ar",
    "vllm_omni.core.sched.omni_generation_scheduler.OmniGenerationScheduler": "generation",
}
STOCK_FILES = {
    "qwen2.5-omni": "qwen2_5_omni.yaml",
    "qwen3-omni": "qwen3_omni_moe.yaml",
    "bagel": "bagel.yaml",
    "mimo-audio": "mimo_audio.yaml",
}
LAYOUT_SOURCES = {
    "qwen2.5-omni": "https://github.com/vllm-project/vllm-omni/blob/v0.16.0/vllm_omni/"
    "model_executor/stage_configs/qwen2_5_omni.yaml"
}

_ARCH = "Qwen2_5OmniForConditionalGeneration"
_INPUTS = "vllm_omni.model_executor.stage_input_processors."
# the thinker's and code2wav's sampling parameters in the stock layout (greedy)
_GREEDY = {
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": -1,
    "max_tokens": 2048,
    "seed": 42,
    "detokenize": True,
    "repetition_penalty": 1.1,
}
_COMMON = {
    "model_arch": _ARCH,
    "enforce_eager": True,
    "trust_remote_code": True,
    "enable_prefix_caching": False,
    "max_num_batched_tokens": 32768,
}
# Qwen2.5-Omni in vLLM-Omni 0.16.0 (LAYOUT_SOURCES): thinker -> talker -> code2wav, whole
# outputs handed over (window_size -1). Values are the stock file's.
LAYOUTS: dict[str, dict[str, Any]] = {
    "qwen2.5-omni": {
        "stage_args": [
            {
                "stage_id": 0,
                "stage_type": "llm",
                "runtime": {"process": True, "devices": "0", "max_batch_size": 1},
                "engine_args": {
                    "model_stage": "thinker",
                    **_COMMON,
                    "worker_type": "ar",
                    "scheduler_cls": "vllm_omni.core.sched.omni_ar_scheduler.OmniARScheduler",
                    "gpu_memory_utilization": 0.8,
                    "engine_output_type": "latent",
                    "mm_processor_cache_gb": 0,
                },
                "is_comprehension": True,
                "final_output": True,
                "final_output_type": "text",
                "default_sampling_params": dict(_GREEDY),
            },
            {
                "stage_id": 1,
                "stage_type": "llm",
                "runtime": {"process": True, "devices": "1", "max_batch_size": 1},
                "engine_args": {
                    "model_stage": "talker",
                    **_COMMON,
                    "worker_type": "ar",
                    "scheduler_cls": "vllm_omni.core.sched.omni_ar_scheduler.OmniARScheduler",
                    "gpu_memory_utilization": 0.8,
                    "engine_output_type": "latent",
                },
                "engine_input_source": [0],
                "custom_process_input_func": _INPUTS + "qwen2_5_omni.thinker2talker",
                "default_sampling_params": {
                    "temperature": 0.9,
                    "top_p": 0.8,
                    "top_k": 40,
                    "max_tokens": 2048,
                    "seed": 42,
                    "detokenize": True,
                    "repetition_penalty": 1.05,
                    "stop_token_ids": [8294],
                },
            },
            {
                "stage_id": 2,
                "stage_type": "llm",
                "runtime": {"process": True, "devices": "0", "max_batch_size": 1},
                "engine_args": {
                    "model_stage": "code2wav",
                    **_COMMON,
                    "worker_type": "generation",
                    "scheduler_cls": "vllm_omni.core.sched.omni_generation_scheduler.OmniGenerationScheduler",
                    "gpu_memory_utilization": 0.15,
                    "async_scheduling": False,
                    "engine_output_type": "audio",
                },
                "engine_input_source": [1],
                "final_output": True,
                "final_output_type": "audio",
                "default_sampling_params": dict(_GREEDY),
            },
        ],
        "runtime": {
            "enabled": True,
            "defaults": {"window_size": -1, "max_inflight": 1},
            "edges": [{"from": 0, "to": 1, "window_size": -1}, {"from": 1, "to": 2, "window_size": -1}],
        },
    }
}


def installed_stock(model: str) -> tuple[dict[str, Any], str] | None:
    """The stock stage config bundled with an installed vLLM-Omni, read as a file."""
    name = STOCK_FILES.get(model)
    spec = importlib.util.find_spec("vllm_omni") if name else None
    if spec is None or spec.origin is None or name is None:
        return None
    path = Path(spec.origin).parent / "model_executor" / "stage_configs" / name
    if not path.is_file():
        return None
    return yaml.safe_load(path.read_text()), str(path)


def stock_config(model: str, stock: Path | None = None) -> tuple[dict[str, Any], str]:
    """(stock config, where it came from)."""
    if stock is not None:
        data = yaml.safe_load(stock.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("stage_args"), list):
            raise ValueError(f"{stock}: stage_args: expected a list of stages (a vLLM-Omni stage config)")
        return data, str(stock)
    found = installed_stock(model)
    if found is not None:
        return found
    if model in LAYOUTS:
        return copy.deepcopy(LAYOUTS[model]), LAYOUT_SOURCES[model]
    raise ValueError(
        f"no stock vLLM-Omni layout known for {model!r} (known: {sorted(LAYOUTS)}); pass --stock FILE"
    )


def _kind(engine_args: dict[str, Any]) -> str | None:
    """'ar' / 'generation' for a stage omniplane wraps, None otherwise."""
    kind = STOCK_SCHEDULERS.get(str(engine_args.get("scheduler_cls", "")))
    wt = engine_args.get("worker_type")
    return kind or (str(wt).lower() if wt in ("ar", "generation") else None)


def omniplane_config(
    stock: dict[str, Any],
    slo: SloTable,
    *,
    policy: str = "fcfs",
    gpu: GPUKind | None = None,
    control: str = "omniplane",
    single_gpu: bool = True,
    memory_budget: float = 0.9,
) -> dict[str, Any]:
    if not 0 < memory_budget <= 1:
        raise ValueError(f"memory_budget must be in (0, 1], got {memory_budget}")
    out = copy.deepcopy(stock)
    stages = out["stage_args"]
    wrapped = [s for s in stages if s.get("stage_type", "llm") == "llm" and _kind(s.get("engine_args") or {})]
    shared = [s for s in wrapped if s.get("is_comprehension")] or wrapped[:1]
    if not shared:
        raise ValueError("no LLM stage with vLLM-Omni's AR or generation scheduler to wrap")
    downstream = [s for s in wrapped if s is not shared[0]]
    table = {
        "kind": slo.kind,
        "source": slo.source,
        "classes": {n: c.model_dump(mode="json") for n, c in slo.classes.items()},
    }
    common: dict[str, Any] = {
        "control": control,
        "control_slots": 1 + max(1, len(downstream)),
        "slo_table": table,
        "total_sms": gpu.sms if gpu is not None else 0,
    }
    if gpu is not None:  # the partition rule of the null ladder and of the scheduler's snapping
        common["compute_capability"] = "{}.{}".format(*compute_capability(gpu))
    if single_gpu:
        utils = [float((s.get("engine_args") or {}).get("gpu_memory_utilization", 0.0)) for s in stages]
        scale = min(1.0, memory_budget / sum(utils)) if sum(utils) else 1.0
    for stage in stages:
        ea = stage.setdefault("engine_args", {})
        if single_gpu:
            stage.setdefault("runtime", {})["devices"] = "0"
            if "gpu_memory_utilization" in ea:
                ea["gpu_memory_utilization"] = round(float(ea["gpu_memory_utilization"]) * scale, 3)
        if not any(stage is w for w in wrapped):
            continue
        kind = _kind(ea)
        assert kind is not None
        role = "shared" if stage is shared[0] else "downstream"
        settings = {
            **copy.deepcopy(common),
            "policy": policy if role == "shared" else "fcfs",
            "role": role,
            "slot": 0 if role == "shared" else 1 + [id(d) for d in downstream].index(id(stage)),
            "sampler": "auto" if role == "shared" else "null",
        }
        ea["scheduler_cls"], ea["worker_cls"], ea["enforce_eager"] = SCHEDULERS[kind], WORKERS[kind], True
        extra = dict(ea.get("additional_config") or {})
        extra["omniplane"] = settings
        ea["additional_config"] = extra
    return out


def dump_config(config: dict[str, Any], header: str) -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    return (
        "\n".join(lines) + "\n" + yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=110)
    )
