"""Executor groups on their own GPU kind (a mixed fleet): each group is priced on its kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.plan.prices import Price, plan_hourly
from omniplane.plan.show import render
from omniplane.sim import simulate
from omniplane.sim.build import build_topology
from omniplane.sim.eventloop import EventLoop
from omniplane.spec import SpecError, find_catalog_workload, load_gpus, load_plan, load_workload
from omniplane.spec.catalog import catalog_plan_paths
from omniplane.workload.generate import generate

BASE = next(p for p in catalog_plan_paths() if p.stem == "qwen3-omni-8xa100-cornfigurator")


def _write(tmp_path: Path, back_gpu: str | None, name: str = "p.yaml") -> Path:
    doc: dict[str, Any] = yaml.safe_load(BASE.read_text())
    doc["gpu"] = "H100"
    if back_gpu is not None:
        for n in doc["nodes"]:
            if n["name"] == "back":
                n["executors"][0]["gpu"] = back_gpu
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def test_an_unknown_group_gpu_names_file_field_and_the_kinds_expected(tmp_path: Path) -> None:
    path = _write(tmp_path, "L40X")
    with pytest.raises(SpecError) as exc:
        load_plan(path)
    text = str(exc.value)
    assert str(path) in text and "executors" in text and "gpu" in text
    assert "L40X" in text and "L40S" in text  # what was given and what is expected


def test_a_plan_without_group_gpus_loads_as_before(tmp_path: Path) -> None:
    plan = load_plan(_write(tmp_path, None)).spec
    assert all(g.gpu is None for n in plan.nodes for g in n.executors)
    assert plan.gpus_by_kind() == {"H100": 8}


def test_each_group_runs_on_its_kind_in_the_simulator(tmp_path: Path) -> None:
    plan = load_plan(_write(tmp_path, "L40S"))
    cost = CostModel(plan.model)
    topo = build_topology(plan.model, plan.spec, plan.gpu, cost, EventLoop())
    kinds = {ex.name.split("/")[0]: {e.cfg.gpu.name for e in ex.engines} for ex in topo.executors}
    assert kinds["back"] == {"L40S"}
    assert kinds["front"] == {plan.gpu.name} == {"H100-SXM"}


def test_moving_the_talker_group_to_l40s_slows_audio_as_the_cost_model_says(tmp_path: Path) -> None:
    """Same requests; the text types never touch the back node, so they do not change; the
    audio types' talker + code2wav time grows by about the cost model's step-time ratio."""
    wl = load_workload(find_catalog_workload("qwen3-omni-servegen") or "")
    reqs = generate(wl, n=150, rate=1.0, seed=3)
    runs = {}
    for kind in ("H100", "L40S"):
        plan = load_plan(_write(tmp_path, kind if kind != "H100" else None, f"{kind}.yaml"))
        runs[kind] = simulate(plan, reqs, CostModel(plan.model), seed=0).requests
    h, l_ = runs["H100"], runs["L40S"]
    text = np.char.endswith(h.type.astype(str), "2t")
    # only the img -> front edge (both on H100, one host) differs: its bytes over NVLink
    # (omniplane.perf.links), microseconds, where the plan without group kinds pays none
    np.testing.assert_allclose(h.first_response[text], l_.first_response[text], equal_nan=True, atol=1e-3)
    audio = ~text & ~np.isnan(h.done["talker"]) & ~np.isnan(l_.done["talker"])
    assert audio.sum() > 10
    back_h = h.done["code2wav"][audio] - h.done["thinker"][audio]
    back_l = l_.done["code2wav"][audio] - l_.done["thinker"][audio]
    gpus = load_gpus()
    cost = CostModel(load_plan(BASE).model)
    step = {k: cost.llm_iteration_time("talker", ExecutorConfig(gpus.get(k), 1, 64), decode_batch=1,
                                       decode_context=512) for k in ("H100", "L40S")}
    ratio = step["L40S"] / step["H100"]
    assert ratio > 1.05
    # at light load the back stages are mostly the talker's decode: the medians scale with it
    measured = float(np.median(back_l) / np.median(back_h))
    assert 1 + 0.5 * (ratio - 1) < measured < 1.5 * ratio


def test_cost_attribution_prices_each_group_at_its_kind(tmp_path: Path) -> None:
    spec = load_plan(_write(tmp_path, "L40S")).spec
    prices = {"H100-SXM": Price("H100-SXM", 4.0, "test", "-"), "L40S": Price("L40S", 1.0, "test", "-")}
    hourly, per = plan_hourly(spec, prices)
    assert per == {"H100-SXM": 3 * 4.0, "L40S": 5 * 1.0}
    assert hourly == 17.0
    assert plan_hourly(spec, {"H100-SXM": prices["H100-SXM"]})[0] is None
    assert "3 x H100 + 5 x L40S" in render(spec) and "L40S)" in render(spec)


def _runtime_plan(tmp_path: Path, back_gpu: str | None) -> Path:
    """A plan vLLM-Omni runs: the thinker stage (with its encoders) on H100, talker + code2wav
    sharing GPUs on ``back_gpu`` (None: the plan's H100)."""
    back: dict[str, Any] = {"count": 3, "tp": 1, "max_batch": 32}
    if back_gpu is not None:
        back["gpu"] = back_gpu
    front = ["image_encoder", "video_encoder", "audio_encoder", "thinker"]
    doc = {"kind": "plan", "name": "mixed", "model": "qwen3-omni", "gpu": "H100", "nodes": [
        {"name": "front", "components": front, "executors": [{"count": 2, "tp": 1, "max_batch": 16}]},
        {"name": "back", "components": ["talker", "code2wav"], "executors": [back], "sharing": "timeslice"}],
        "routes": {t: [{"nodes": ["front", "back"] if t.endswith("2a") else ["front"], "p": 1.0}]
                   for t in ("ti2t", "tiv2t", "tia2t", "tiva2t", "ti2a", "tiv2a", "tia2a", "tiva2a")}}
    path = tmp_path / f"runtime-{back_gpu}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_vllm_omni_export_places_each_kind_on_its_own_hosts(tmp_path: Path) -> None:
    from omniplane.deploy.export_omni import export_vllm_omni
    from omniplane.deploy.placement import Hosts, PlacementError

    ex = export_vllm_omni(load_plan(_runtime_plan(tmp_path, "L40S")), Hosts.parse(None))
    placed = yaml.safe_load(ex.files["placement.yaml"])
    kind_of = {h: v["gpu"] for h, v in placed["hosts"].items()}
    nodes_on = {h: {e["node"] for e in v["executors"]} for h, v in placed["hosts"].items()}
    assert sorted(kind_of.values()) == ["H100-SXM", "L40S"]
    for h, nodes in nodes_on.items():
        assert nodes == ({"front"} if kind_of[h] == "H100-SXM" else {"back"})
    assert placed["edges"]["d0: front -> back"] == "across hosts"
    # the talker + code2wav GPUs are sized on the L40S's 48 GB, not the H100's 80 GB
    same = export_vllm_omni(load_plan(_runtime_plan(tmp_path, None)), Hosts.parse(None))

    def util(e: Any) -> float:
        doc = e.configs["d0"]
        return float(next(s for s in doc["stages"] if s["stage_id"] == 2)["gpu_memory_utilization"])

    assert util(ex) != util(same)
    assert "L40S" in "".join(ex.configs["d0"]["omniplane"]["memory"])
    with pytest.raises(PlacementError, match="2 GPU kinds"):
        export_vllm_omni(load_plan(_runtime_plan(tmp_path, "L40S")), Hosts.parse("2x8"))
