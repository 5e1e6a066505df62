"""Every deploy YAML ``omniplane export --target vllm-omni`` writes loads through vLLM-Omni
0.30's own loader (``load_deploy_config`` + ``merge_pipeline_deploy``, via ``resolve_omni_config``)
with the plan's replicas, devices, TP and max batch; vLLM-Omni splits the devices per replica
as the placement says, and every shared GPU's stages pass its admission arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm_omni")
pytestmark = pytest.mark.omni

from transformers import AutoConfig  # noqa: E402
from vllm_omni.config import pipeline_registry  # noqa: E402
from vllm_omni.config.stage_config import load_deploy_config, merge_pipeline_deploy  # noqa: E402
from vllm_omni.engine.stage_init_utils import compute_replica_layout  # noqa: E402

from omniplane.deploy.export_omni import export_vllm_omni  # noqa: E402
from omniplane.deploy.placement import Hosts  # noqa: E402
from omniplane.spec import load_plan  # noqa: E402
from omniplane.spec.load import load_layout  # noqa: E402
from omniplane.vllm.omni_pipelines import register  # noqa: E402
from tests.vllm.omni_loader import hf_dir, resolve  # noqa: E402
from tests.vllm.test_omni_memory import _admit  # noqa: E402

PLANS = Path(__file__).parents[1] / "deploy"
CASES = [("qwen3-omni-2dep.yaml", "2x8"), ("qwen3-omni-2dep.yaml", "3x4"), ("qwen2.5-omni-1dep.yaml", "1x2")]


@pytest.mark.parametrize(("plan_file", "hosts"), CASES)
def test_exported_files_load_through_vllm_omnis_loader(tmp_path: Path, plan_file: str, hosts: str) -> None:
    plan = load_plan(PLANS / plan_file)
    ex = export_vllm_omni(plan, Hosts.parse(hosts))
    register()
    for dep in ex.deployments:
        path = tmp_path / f"{dep.name}.yaml"
        path.write_text(ex.files[f"{dep.name}.yaml"])  # the file as written, header comments and all
        deploy = load_deploy_config(path)
        model = plan.model.name
        layout = load_layout(model)
        assert layout is not None
        hf = AutoConfig.from_pretrained(str(hf_dir(model, tmp_path)))
        pipe = pipeline_registry.resolve_pipeline_config(deploy.pipeline or layout.model_type, hf)
        assert pipe is not None
        merged = merge_pipeline_deploy(pipe, deploy)
        assert [s.stage_id for s in merged] == [s.stage_id for s in layout.stages]
        res, _ = resolve(model, path, tmp_path, dep.name)
        cfgs = {c.stage_id: c for c in res.stage_configs}
        multi = len(ex.placement.hosts_of(dep.name)) > 1
        replicas, split = compute_replica_layout(res.stage_configs)
        for g in dep.groups:
            for sid in g.stage_ids:
                c = cfgs[sid]
                assert (c.runtime_config.num_replicas, c.parallel_config.tensor_parallel_size,
                        c.scheduler_config.max_num_seqs) == (g.count, g.tp, g.max_batch)
                if g.count > 1:  # vLLM-Omni's own per-replica split of the devices
                    want = [",".join(str(i) for i in range(r * g.tp, (r + 1) * g.tp)) for r in range(g.count)]
                    if not multi:
                        host = ex.placement.hosts_of(dep.name)[0]
                        local = {p: i for i, p in enumerate(ex.placement.gpus_on(dep.name, host))}
                        want = [",".join(str(local[p]) for p in e.gpus)
                                for e in ex.placement.of(dep.name, g.node)]
                    assert split[list(cfgs).index(sid)] == want
                assert replicas[list(cfgs).index(sid)] == g.count
            got = [{"gpu_memory_utilization": cfgs[s].cache_config.gpu_memory_utilization,
                    "enforce_eager": cfgs[s].model_config.enforce_eager} for s in g.stage_ids]
            want_util = [ex.configs[dep.name]["stages"][s]["gpu_memory_utilization"] for s in g.stage_ids]
            assert [x["gpu_memory_utilization"] for x in got] == want_util
            _admit(got, plan.gpu.memory_bytes)  # vLLM-Omni's admission of one of the group's GPUs
