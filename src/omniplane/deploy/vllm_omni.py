"""vLLM-Omni stage configs for each plan node, and the replica that would start them.

vLLM-Omni runs a model as *stages* (thinker, talker, code2wav), each an engine with its own
scheduler and worker, described by a ``stage_args`` YAML. A plan node becomes one such file:
the stages hosting the node's components (encoders run inside the thinker stage, as in
vLLM-Omni's stock layout), on the replica's GPUs (``runtime.devices`` counts from 0: Ray sets
``CUDA_VISIBLE_DEVICES`` per replica), with the plan's TP degree and batch size. Edges between
stages of one node keep vLLM-Omni's in-process wiring (``engine_input_source`` and the stock
input processors); edges to stages on other nodes use vLLM-Omni's Mooncake connector
(``input_connectors`` / ``output_connectors``). An encoder-only node is a thinker stage that
only encodes and hands the embeddings to the LLM's node through vLLM's encoder-cache transfer
(``ec_transfer_config``, producer/consumer).

Not verified on GPUs here (no GPU, no vLLM-Omni on this machine): the generated files follow
the stock Qwen3-Omni layout below; the encoder-only and cross-node connector parts are the
least certain and are marked with ``omniplane_note`` in the output.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from omniplane.deploy.messages import FAILED, OPENED, OpenOrder, Released, StageEvent
from omniplane.spec import ComponentKind, ResolvedPlan

STOCK_SOURCE = (
    "https://github.com/vllm-project/vllm-omni/blob/01f945306f2cac5cbb22c68d97716eaf0787ca88/"
    "vllm_omni/model_executor/stage_configs/qwen3_omni_moe.yaml"
)
GPU_MEMORY_BUDGET = 0.9  # assumption: vLLM's default gpu_memory_utilization, shared by a replica's stages


@dataclass(frozen=True)
class StockStage:
    """One stage of vLLM-Omni's stock layout of a model (``STOCK_SOURCE``)."""

    engine_args: dict[str, Any]
    memory_share: float  # the stock gpu_memory_utilization, used as a relative weight
    input_func: str = ""  # custom_process_input_func when fed by the previous stage
    final_output_type: str = ""


_AR = {
    "worker_cls": "vllm_omni.worker.gpu_ar_worker.GPUARWorker",
    "scheduler_cls": "vllm_omni.core.sched.omni_ar_scheduler.OmniARScheduler",
}
_GEN = {
    "worker_cls": "vllm_omni.worker.gpu_generation_worker.GPUGenerationWorker",
    "scheduler_cls": "vllm_omni.core.sched.omni_generation_scheduler.OmniGenerationScheduler",
}
_COMMON = {
    "enforce_eager": True,
    "trust_remote_code": True,
    "enable_prefix_caching": False,
    "distributed_executor_backend": "mp",
}

# model -> (HF id, model_arch, component -> stage name, stage name -> StockStage)
STOCK: dict[str, tuple[str, str, dict[str, str], dict[str, StockStage]]] = {
    "qwen3-omni": (
        "Qwen/Qwen3-Omni-30B-A3B-Instruct",
        "Qwen3OmniMoeForConditionalGeneration",
        {
            "audio_encoder": "thinker",
            "image_encoder": "thinker",
            "video_encoder": "thinker",
            "thinker": "thinker",
            "talker": "talker",
            "code2wav": "code2wav",
        },
        {
            "thinker": StockStage(
                {
                    **_AR,
                    **_COMMON,
                    "model_stage": "thinker",
                    "engine_output_type": "latent",
                    "hf_config_name": "thinker_config",
                },
                0.6,
                final_output_type="text",
            ),
            "talker": StockStage(
                {
                    **_AR,
                    **_COMMON,
                    "model_stage": "talker",
                    "engine_output_type": "latent",
                    "hf_config_name": "talker_config",
                },
                0.5,
                "vllm_omni.model_executor.stage_input_processors.qwen3_omni.thinker2talker",
            ),
            "code2wav": StockStage(
                {
                    **_GEN,
                    **_COMMON,
                    "model_stage": "code2wav",
                    "engine_output_type": "audio",
                    "hf_config_name": "thinker_config",
                },
                0.1,
                "vllm_omni.model_executor.stage_input_processors.qwen3_omni.talker2code2wav",
                final_output_type="audio",
            ),
        },
    ),
}
STAGE_ORDER = ("thinker", "talker", "code2wav")


def _stock(plan: ResolvedPlan) -> tuple[str, str, dict[str, str], dict[str, StockStage]]:
    try:
        return STOCK[plan.model.name]
    except KeyError:
        raise ValueError(
            f"no vLLM-Omni stage layout known for model {plan.model.name!r} "
            f"(known: {', '.join(STOCK)}); use --engine emulated"
        ) from None


def node_stage_config(
    plan: ResolvedPlan, node: str, group: int = 0, mooncake: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``stage_args`` document for one replica of executor group ``group`` of ``node``."""
    hf_id, arch, stage_of, stages = _stock(plan)
    pnode, model = plan.spec.node(node), plan.model
    g = pnode.executors[group]
    mine = [s for s in STAGE_ORDER if any(stage_of[c] == s for c in pnode.components)]
    # the node running each stage's model (the thinker stage's is the one with the thinker LLM)
    home = {
        stage_of[c]: n.name
        for n in plan.spec.nodes
        for c in n.components
        if stage_of[c] != "thinker" or model.component(c).is_llm
    }
    remote_encoders = [
        c
        for n in plan.spec.nodes
        if n.name != node
        for c in n.components
        if model.component(c).kind is ComponentKind.ENCODER
    ]
    weight = sum(stages[s].memory_share for s in mine)
    devices = ",".join(str(i) for i in range(g.tp))
    out: list[dict[str, Any]] = []
    for sid, name in enumerate(mine):
        st = stages[name]
        args = {
            **st.engine_args,
            "model_arch": arch,
            "tensor_parallel_size": g.tp,
            "max_num_seqs": g.max_batch,
            "gpu_memory_utilization": round(GPU_MEMORY_BUDGET * st.memory_share / weight, 3),
        }
        stage: dict[str, Any] = {
            "stage_id": sid,
            "runtime": {"devices": devices, "max_batch_size": g.max_batch},
            "engine_args": args,
        }
        i = STAGE_ORDER.index(name)
        prev = STAGE_ORDER[i - 1] if i else None
        nxt = STAGE_ORDER[i + 1] if i + 1 < len(STAGE_ORDER) else None
        if prev in mine:
            stage["engine_input_source"] = [mine.index(prev)]
            stage["custom_process_input_func"] = st.input_func
        elif prev is not None and prev in home:
            stage["custom_process_input_func"] = st.input_func
            stage["input_connectors"] = {f"from_{home[prev]}": "mooncake"}
        if nxt is not None and nxt not in mine and nxt in home:
            stage["output_connectors"] = {f"to_{home[nxt]}": "mooncake"}
        if st.final_output_type:
            stage["final_output"] = True
            stage["final_output_type"] = st.final_output_type
        if name == "thinker" and home.get("thinker") != node:
            encoders = [c for c in pnode.components if stage_of[c] == "thinker"]
            args["ec_transfer_config"] = {"ec_connector": "ECExampleConnector", "ec_role": "ec_producer"}
            stage["omniplane_note"] = (
                f"encoder-only node ({', '.join(encoders)}): runs the thinker stage's "
                "encoders and ships embeddings to the thinker's node; unverified"
            )
            for key in ("final_output", "final_output_type", "output_connectors"):
                stage.pop(key, None)
        elif name == "thinker" and remote_encoders:
            args["ec_transfer_config"] = {"ec_connector": "ECExampleConnector", "ec_role": "ec_consumer"}
            stage["omniplane_note"] = (
                f"receives {', '.join(remote_encoders)} embeddings from other nodes; unverified"
            )
        out.append(stage)
    doc: dict[str, Any] = {
        "model": hf_id,
        "stage_args": out,
        "omniplane": {
            "plan": plan.spec.name,
            "node": node,
            "group": group,
            "components": list(pnode.components),
            "source": STOCK_SOURCE,
        },
    }
    if any("input_connectors" in s or "output_connectors" in s for s in out):
        doc["runtime"] = {
            "enabled": True,
            "connectors": {
                "mooncake": {
                    "name": "MooncakeConnector",
                    "extra": dict(mooncake or {"host": "127.0.0.1", "proto": "tcp"}),
                }
            },
        }
    return doc


def write_stage_configs(plan: ResolvedPlan, out_dir: str | os.PathLike[str]) -> list[Path]:
    """One YAML per executor group of every node: ``<node>-g<group>.yaml``."""
    from omniplane.deploy.orchestrator import deployment_name

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for node in plan.spec.nodes:
        for gi in range(len(node.executors)):
            p = out / f"{deployment_name(node.name, gi)}.yaml"
            p.write_text(yaml.safe_dump(node_stage_config(plan, node.name, gi), sort_keys=False))
            paths.append(p)
    return paths


class VllmOmniStage:
    """A replica running the node's vLLM-Omni stages (needs GPUs and the ``vllm_omni`` package).

    The engines are built from the generated stage config. Carrying a request's intermediate
    tensors between nodes is left to vLLM-Omni's connectors; mapping a session's events onto
    vLLM-Omni's outputs is not implemented in this version (sessions fail with a clear reason).
    """

    def __init__(
        self, plan: ResolvedPlan, node: str, group: int, *, replica: str = "", config_dir: str = ""
    ) -> None:
        try:
            from vllm_omni.entrypoints import AsyncOmni
        except ImportError as exc:
            raise RuntimeError(
                "the vllm-omni engine needs the vllm-omni package on the replica's "
                "machine (pip install vllm-omni); use --engine emulated to rehearse"
            ) from exc
        from omniplane.deploy.orchestrator import deployment_name

        path = Path(config_dir or ".") / f"{deployment_name(node, group)}.yaml"
        doc = node_stage_config(plan, node, group)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        self.replica = replica
        self.omni = AsyncOmni(model=doc["model"], stage_configs_path=str(path))

    async def open(self, order: OpenOrder) -> AsyncIterator[StageEvent]:
        yield StageEvent(OPENED, info={"replica": self.replica})
        yield StageEvent(
            FAILED,
            order.comps[0] if order.comps else "",
            0.0,
            {"reason": "vllm-omni sessions are not wired in this version (docs/deploy.md)"},
        )

    def release(self, rid: int, rel: Released) -> bool:
        return False

    def upstream_done(self, rid: int, comp: str) -> bool:
        return False

    def stats(self) -> dict[str, Any]:
        return {"replica": self.replica, "engine": "vllm-omni"}
