"""Mixed fleets: an edge between nodes pays the bytes it carries over the link between them
(omniplane.perf.links), within a host over the GPU's interconnect, across hosts over the network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from omniplane.perf import CostModel
from omniplane.perf.links import HOST_NETWORK_GBS, INTER_HOST_LATENCY_S, INTRA_HOST_LATENCY_S, edge_bytes
from omniplane.sim import simulate
from omniplane.sim.build import edge_costs
from omniplane.spec import find_catalog_workload, load_gpus, load_model, load_plan, load_workload
from omniplane.spec.catalog import catalog_plan_paths
from omniplane.workload.generate import generate

BASE = next(p for p in catalog_plan_paths() if p.stem == "qwen3-omni-8xa100-cornfigurator")


def _plan(tmp_path: Path, host_gpus: int | None, back: str = "H100", name: str = "p.yaml") -> Any:
    doc: dict[str, Any] = yaml.safe_load(BASE.read_text())
    doc["gpu"] = "H100"
    for n in doc["nodes"]:
        n["executors"][0]["gpu"] = back if n["name"] == "back" else "H100"
    if host_gpus is not None:
        doc["meta"]["inventory"] = {"host_gpus": host_gpus}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return load_plan(path)


def test_the_thinker_hands_the_talker_two_vectors_per_prompt_token_and_encoders_their_streams() -> None:
    m = load_model("qwen3-omni")
    th = m.component("thinker").size
    tt = edge_bytes(m, "thinker", "talker")  # streaming: the prompt's vectors at the first output
    assert tt.per_unit == 2 * (th.hidden or 0) * th.bytes_per_param and tt.fields == ("prompt_tokens",)
    img = edge_bytes(m, "image_encoder", "thinker")
    assert img.per_unit == (m.component("image_encoder").size.output_streams or 0) * (th.hidden or 0) * 2
    assert img.fields == ("tokens",)
    codes = edge_bytes(m, "talker", "code2wav")
    assert codes.per_unit == 16 * 8 and codes.fields == ("output_tokens",)


def test_a_plan_without_group_kinds_keeps_the_fixed_transfer_alone(tmp_path: Path) -> None:
    plan = load_plan(BASE)
    assert edge_costs(plan.model, plan.spec, plan.gpu, {}) == {}


def test_two_kinds_are_two_hosts_at_the_slower_network(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 8, back="L40S")
    gpus = load_gpus()
    costs = edge_costs(plan.model, plan.spec, plan.gpu, {"H100": gpus.get("H100"), "L40S": gpus.get("L40S")})
    lat, per_unit, _ = costs["thinker", "talker", "front", "back"]
    assert lat == INTER_HOST_LATENCY_S
    bw = min(HOST_NETWORK_GBS.values()) * 1e9  # L40S hosts' network per GPU < H100 hosts'
    assert per_unit == edge_bytes(plan.model, "thinker", "talker").per_unit / bw


def test_a_cross_host_edge_delays_the_talker_by_its_bytes_over_the_network(tmp_path: Path) -> None:
    """The same plan on one host (8 H100 in hosts of 8) and split over hosts (hosts of 1): the
    talker starts later after the thinker's first output by exactly the prompt's hidden states
    over the network instead of over NVLink (plus the latency difference); one request at a time."""
    wl = load_workload(find_catalog_workload("qwen3-omni-servegen") or "")
    reqs = generate(wl, n=40, rate=0.05, seed=5)
    runs = {}
    for host in (8, 1):
        plan = _plan(tmp_path, host, name=f"h{host}.yaml")
        runs[host] = simulate(plan, reqs, CostModel(plan.model), seed=0).requests
    one, split = runs[8], runs[1]
    audio = ~np.isnan(one.first_out["talker"])
    assert audio.sum() >= 5
    gap = {h: r.first_out["talker"][audio] - r.first_out["thinker"][audio] for h, r in runs.items()}
    h100 = load_gpus().get("H100")
    per_token = edge_bytes(load_model("qwen3-omni"), "thinker", "talker").per_unit
    prompt = np.array([r.work["thinker"]["prompt_tokens"] for r, a in zip(reqs, audio, strict=True) if a])
    expected = (prompt * per_token * (1 / (HOST_NETWORK_GBS["nvlink"] * 1e9) - 1 / h100.link_bw)
                + INTER_HOST_LATENCY_S - INTRA_HOST_LATENCY_S)
    assert np.all(expected > 0)
    np.testing.assert_allclose(gap[1] - gap[8], expected, rtol=1e-6, atol=1e-9)
    assert np.all(split.finish[audio] >= one.finish[audio])


def test_groups_of_one_kind_beyond_one_host_are_placed_and_an_edge_within_a_host_is_priced_there(
        tmp_path: Path) -> None:
    """16 L40S on hosts of 8 (omniplane.perf.hosts): the encoders and thinker fill one host, the
    talker (6) and code2wav (2) the other; the talker -> code2wav edge stays within that host, the
    thinker -> talker edge crosses hosts."""
    doc: dict[str, Any] = yaml.safe_load(BASE.read_text())
    doc.update(gpu="L40S", gpus=16)
    def node(name: str, comps: list[str], count: int, tp: int = 1) -> dict[str, Any]:
        return {"name": name, "components": comps,
                "executors": [{"count": count, "tp": tp, "max_batch": 32, "gpu": "L40S"}]}

    doc["nodes"] = [node("img", ["image_encoder"], 2),
                    node("front", ["video_encoder", "audio_encoder", "thinker"], 3, 2),
                    node("talker", ["talker"], 6), node("code2wav", ["code2wav"], 2)]
    for t, routes in doc["routes"].items():
        routes[0]["nodes"] = ["img", "front", "talker", "code2wav"] if t.endswith("2a") else ["img", "front"]
    doc["meta"]["inventory"] = {"host_gpus": 8}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    plan = load_plan(tmp_path / "p.yaml")
    l40s = load_gpus().get("L40S")
    costs = edge_costs(plan.model, plan.spec, plan.gpu, {"L40S": l40s})
    lat, per_unit, _ = costs["talker", "code2wav", "talker", "code2wav"]
    assert lat == INTRA_HOST_LATENCY_S
    assert per_unit == edge_bytes(plan.model, "talker", "code2wav").per_unit / l40s.link_bw
    lat, per_unit, _ = costs["thinker", "talker", "front", "talker"]
    assert lat == INTER_HOST_LATENCY_S
    assert per_unit == edge_bytes(plan.model, "thinker", "talker").per_unit / (HOST_NETWORK_GBS["pcie"] * 1e9)
