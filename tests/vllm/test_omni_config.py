"""The catalog layouts and the deploy configs omniplane writes, against the installed vLLM-Omni.

- the catalog's layout files are vLLM-Omni's: the deploy half equals the wheel's
  ``vllm_omni/deploy/<model>.yaml``, the topology the wheel's registered pipeline;
- every generated deploy config loads through vLLM-Omni's own loader (``resolve_omni_config``,
  what ``vllm serve --omni --deploy-config`` and ``AsyncOmni`` call) and the engine arguments it
  projects for each stage name omniplane's scheduler and worker classes and carry the settings;
- omniplane's plugin is found through both entry-point groups and registers the pipelines;
- a request's class reaches stage 0 through vLLM-Omni's own request path: the final stage
  chosen from the requested output modalities (``get_final_stage_id_for_e2e``), stamped by
  ``apply_omni_final_stage_metadata``, carried by ``OmniRequest`` into omniplane's scheduler;
  downstream stages get the class of the output they lead to.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("vllm_omni")
pytestmark = pytest.mark.omni

import vllm_omni  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.engine import EngineCoreRequest  # noqa: E402
from vllm_omni.config import pipeline_registry  # noqa: E402
from vllm_omni.engine.async_engine_utils import (  # noqa: E402
    apply_omni_final_stage_metadata,
    upgrade_to_omni_request,
)
from vllm_omni.engine.stage_init_utils import build_engine_args_dict_from_omni_stage_config  # noqa: E402
from vllm_omni.entrypoints.utils import get_final_stage_id_for_e2e  # noqa: E402
from vllm_omni.request import OmniRequest  # noqa: E402

from omniplane.spec.layout import layout_models  # noqa: E402
from omniplane.spec.load import load_layout  # noqa: E402
from omniplane.vllm import omni_pipelines, plugin  # noqa: E402
from omniplane.vllm.omni_scheduler import OmniplaneOmniARScheduler  # noqa: E402
from omniplane.vllm.settings import load_settings  # noqa: E402
from tests.vllm.harness import make_scheduler  # noqa: E402
from tests.vllm.omni_loader import HF_CONFIGS, hf_dir, resolve  # noqa: E402
from tests.vllm.test_stage_config import WRAPPED, generate  # noqa: E402

WHEEL = Path(vllm_omni.__file__).parent


def test_catalog_layouts_are_the_installed_wheels(tmp_path: Path) -> None:
    from transformers import AutoConfig

    assert sorted(layout_models()) == sorted([*HF_CONFIGS, "qwen-image"])
    for model in layout_models():
        layout = load_layout(model)
        assert layout is not None and layout.vllm_omni == vllm_omni.__version__, model
        if layout.model_type == "generic_diffusion":
            assert layout.model_type not in pipeline_registry.OMNI_PIPELINES
            continue
        rel = layout.source.split("/vllm_omni/", 1)[1]
        assert layout.deploy == yaml.safe_load((WHEEL / rel).read_text()), f"{model}: deploy half differs"
        d = hf_dir(model, tmp_path)
        try:
            hf = AutoConfig.from_pretrained(str(d))
        except ValueError:
            hf = None  # model types transformers does not know (BAGEL): the registry's config needs none
        pipe = pipeline_registry.resolve_pipeline_config(layout.model_type, hf)
        assert pipe is not None, model
        assert [
            (s.stage_id, s.model_stage, s.execution_type.value, list(s.input_sources), s.final_output_type)
            for s in pipe.stages
        ] == [
            (s.stage_id, s.model_stage, s.execution, s.input_sources, s.final_output_type)
            for s in layout.stages
        ], f"{model}: topology differs"
        assert pipe.model_arch == layout.model_arch


@pytest.mark.parametrize("model", WRAPPED)
def test_every_generated_config_loads_through_vllm_omnis_loader(tmp_path: Path, model: str) -> None:
    layout = load_layout(model)
    assert layout is not None
    generate(tmp_path, model, "--gpu", "H200")
    res, hf_dir = resolve(model, tmp_path / f"{model}.yaml", tmp_path)
    assert [s.stage_id for s in res.stage_configs] == [s.stage_id for s in layout.stages]
    roles = []
    for st, cfg in zip(layout.stages, res.stage_configs, strict=True):
        args = build_engine_args_dict_from_omni_stage_config(cfg, hf_dir)
        assert args["model_stage"] == st.model_stage
        if st.execution not in omni_pipelines.SCHEDULERS:
            assert cfg.scheduler_cls is None and "omniplane" not in json.dumps(args, default=str)
            continue
        assert cfg.scheduler_cls == args["scheduler_cls"] == omni_pipelines.SCHEDULERS[st.execution]
        assert args["worker_cls"].startswith("omniplane.vllm.omni_worker.")
        assert args["enforce_eager"] is True and args["async_scheduling"] is False
        assert str(cfg.runtime_config.devices) == "0"
        s = load_settings(args["additional_config"], {})
        roles.append((s.role, s.slot, s.total_sms))
    assert roles[0] == ("shared", 0, 132) and all(r[0] == "downstream" for r in roles[1:])


def test_the_stock_layout_loads_with_vllm_omnis_own_schedulers(tmp_path: Path) -> None:
    """Control: the catalog's deploy half without omniplane is vLLM-Omni's stock setup."""
    layout = load_layout("qwen2.5-omni")
    assert layout is not None
    stock = tmp_path / "stock.yaml"
    stock.write_text(yaml.safe_dump(layout.deploy))
    res, _ = resolve("qwen2.5-omni", stock, tmp_path)
    assert [c.scheduler_cls.rsplit(".", 1)[1] for c in res.stage_configs] == [
        "OmniARAsyncScheduler",
        "OmniARAsyncScheduler",
        "OmniGenerationScheduler",
    ]
    assert [str(c.runtime_config.devices) for c in res.stage_configs] == ["0", "1", "0"]


def test_the_plugin_is_found_and_registers_the_pipelines() -> None:
    for group in ("vllm.general_plugins", "vllm_omni.general_plugins"):
        eps = [e for e in importlib.metadata.entry_points(group=group) if e.name == "omniplane"]
        assert len(eps) == 1 and eps[0].load() is plugin.register, group
    plugin.register()
    for model in WRAPPED:
        layout = load_layout(model)
        assert layout is not None
        key = omni_pipelines.pipeline_key(layout.model_type)
        assert key in pipeline_registry.OMNI_PIPELINES
    assert omni_pipelines.register() == []  # idempotent


@pytest.mark.parametrize(("modalities", "cls"), [(["text"], "text"), (["audio"], "audio"), (None, "audio")])
def test_the_class_reaches_stage_zero_through_vllm_omnis_request_path(
    tmp_path: Path, configs: dict[str, Any], modalities: list[str] | None, cls: str
) -> None:
    data = generate(tmp_path, "qwen2.5-omni")
    res, _ = resolve("qwen2.5-omni", tmp_path / "qwen2.5-omni.yaml", tmp_path)
    meta = list(res.stage_configs)
    final = get_final_stage_id_for_e2e(modalities, ["text", "audio"], meta)
    core = EngineCoreRequest(
        "r0", list(range(1, 40)), None, SamplingParams(max_tokens=4), None, 0.0, None, None, None, priority=0
    )
    core = upgrade_to_omni_request(core, {"prompt_token_ids": list(range(1, 40))})
    core = apply_omni_final_stage_metadata(core, final)
    request = OmniRequest.from_engine_core_request(core, None)
    stage0 = data["stages"][0]["additional_config"]["omniplane"]
    sched = make_scheduler(OmniplaneOmniARScheduler, configs["fcfs"], {**stage0, "control": None})
    sched.add_request(request)
    [tracked] = sched.omniplane.bridge.by_id.values()
    assert tracked.cls == cls
    assert not sched.omniplane.bridge.resolver.unknown
    # the downstream stages' requests lead to audio whatever they carry
    talker = load_settings(data["stages"][1]["additional_config"], {})
    assert talker.default_class == "audio" and talker.class_source == "metadata"


def test_torchvision_imports_beside_cpu_torch_and_its_c_ops_stay_absent() -> None:
    """The venv's cpu_torchvision hook (Makefile): PyPI's CUDA-built torchvision imports (the
    pipeline registry above needs it) and its C ops are schemas without kernels."""
    import torch
    import torchvision

    from omniplane.vllm import cpu_torchvision

    assert not torchvision.extension._has_ops()
    assert torch.ops.torchvision.nms is not None
    boxes, scores = torch.zeros(1, 4), torch.zeros(1)
    with pytest.raises(NotImplementedError):
        torch.ops.torchvision.nms(boxes, scores, 0.5)
    assert cpu_torchvision.define_missing_ops() == []  # already defined: idempotent
