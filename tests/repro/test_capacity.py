"""Cornfigurator's Table 2 under its conditions (``repro.capacity``) and the runtimes behind it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from omniplane.perf import CostModel, ExecutorConfig
from omniplane.perf.factors import load_calibration
from omniplane.repro.capacity import capacity, conditions, table2_sizes, tiles_for, workload_sizes
from omniplane.repro.validation.anchors import anchors
from omniplane.spec import GPUCatalog, ModelSpec, find_catalog_workload, load_workload

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table2(specs: dict[str, ModelSpec], gpus: GPUCatalog) -> dict[str, dict[str, float]]:
    a100 = gpus.get("A100-80GB")
    return {m: {k: c.requests_per_s for k, c in capacity(specs[m], a100).items()}
            for m in anchors()["cornfigurator_table2"]["rows"]}


def test_every_published_cell_has_a_prediction(table2: dict[str, dict[str, float]]) -> None:
    for model, row in anchors()["cornfigurator_table2"]["rows"].items():
        assert set(row) <= set(table2[model]), model
        assert all(v > 0 for v in table2[model].values())


def test_thinker_talker_ratio_is_the_papers(table2: dict[str, dict[str, float]]) -> None:
    # Cornfigurator 2.1: "nearly 30x"; Table 2: 2.15 / 0.12 = 17.9x. The band: 12-30x.
    ratio = table2["qwen3-omni"]["llm"] / table2["qwen3-omni"]["audio_output"]
    assert 12.0 <= ratio <= 30.0


def test_llm_and_generator_cells_are_close_to_table2(table2: dict[str, dict[str, float]]) -> None:
    """The LLM, speech and image-output cells (what the planner's allocation rests on) are
    within 40% each and 15% at the median; the encoder cells are reported by perf validate
    (docs/results/perf.md says why several miss)."""
    rows = anchors()["cornfigurator_table2"]["rows"]
    errs = [abs(table2[m][c] / v - 1) for m, row in rows.items() for c, v in row.items()
            if c in ("llm", "audio_output", "image_output")]
    assert len(errs) == 9 and max(errs) <= 0.40 and statistics.median(errs) <= 0.15


def test_shipped_servegen_means_are_the_data_s(tmp_path: Path) -> None:
    import runpy

    means = runpy.run_path(str(ROOT / "scripts" / "servegen_means.py"))["servegen_means"](
        ROOT / "src" / "omniplane" / "data" / "servegen-mm-image")
    shipped = conditions()["servegen"]
    for k, v in means.items():
        assert shipped[k] == pytest.approx(v, rel=1e-3), k


def test_internvl_tiles_follow_its_aspect_rule() -> None:
    tile = 448 * 448
    assert tiles_for(510_000, 4 / 3, tile, 12) == 13  # the 4 x 3 grid plus a thumbnail
    assert tiles_for(510_000, 16 / 9, tile, 12) == 3  # 2 x 1 plus a thumbnail
    assert tiles_for(510_000, 1.0, tile, 12) == 5  # 2 x 2 (the image covers over half of it)
    assert tiles_for(100_000, 1.0, tile, 12) == 1  # one tile, no thumbnail


def test_columns_follow_the_model_graph(specs: dict[str, ModelSpec], gpus: GPUCatalog) -> None:
    a100 = gpus.get("A100-80GB")
    assert set(capacity(specs["qwen-image"], a100)) == {"llm", "image_output"}
    assert set(capacity(specs["qwen3-vl"], a100)) == {"image_input", "video_input", "llm"}
    cols = capacity(specs["qwen3-omni"], a100)
    assert cols["audio_output"].components == ("talker", "code2wav") and cols["llm"].tp == 2
    assert cols["image_input"].components == ("image_encoder",)
    assert capacity(specs["qwen2.5-omni"], a100)["llm"].tp == 1  # 7.6B: below the 30B footnote


def test_a_workload_gives_its_own_sizes(specs: dict[str, ModelSpec]) -> None:
    path = find_catalog_workload("qwen3-omni-servegen")
    assert path is not None
    wl = load_workload(path)
    assert wl.spec.mix is not None
    sz = workload_sizes(specs["qwen3-omni"], wl.spec.mix)
    t2 = table2_sizes(specs["qwen3-omni"])
    # the catalog's fits are client-weighted: shorter prompts and replies than Table 2's
    assert 0 < sz.llm_output < t2.llm_output and 0 < sz.talker_output < t2.talker_output


def test_cornserve_runtime_has_no_guidance_and_serial_mtp(specs: dict[str, ModelSpec],
                                                          gpus: GPUCatalog) -> None:
    cal = load_calibration()
    assert cal.default_runtime == "cornserve"
    corn, vllm = CostModel(specs["qwen-image"]), CostModel(specs["qwen-image"], runtime="vllm")
    assert corn.guidance_passes("dit") == 1.0 and vllm.guidance_passes("dit") == 2.0
    cfg = ExecutorConfig(gpus.get("A100-80GB"), 1, 64)
    serial = CostModel(specs["qwen3-omni"])
    batched = CostModel(specs["qwen3-omni"], runtime="vllm")
    # one sequence after another: the MTP share grows with the batch; batched: it barely does
    one = serial.mtp_time("talker", cfg, 1)
    assert serial.mtp_time("talker", cfg, 32) == pytest.approx(32 * one, rel=0.01)
    assert batched.mtp_time("talker", cfg, 32) < 2 * batched.mtp_time("talker", cfg, 1)


def test_bad_runtime_files_name_the_field(tmp_path: Path) -> None:
    from omniplane.perf.factors import default_calibration_path

    data = json.loads(default_calibration_path().read_text())
    data["runtimes"]["vllm"]["step_s"] = -1
    with pytest.raises(ValueError, match=r"runtimes\.vllm: .*step_s"):
        from omniplane.perf.factors import Calibration

        Calibration.from_json(data, "cal.json")
    data = json.loads(default_calibration_path().read_text())
    data["default_runtime"] = "tgi"
    with pytest.raises(ValueError, match="default_runtime"):
        Calibration.from_json(data, "cal.json")


def test_every_catalog_model_has_a_capacity_on_every_gpu(specs: dict[str, ModelSpec],
                                                        gpus: GPUCatalog) -> None:
    for spec in specs.values():
        for gpu in gpus.gpus:
            try:
                cols = capacity(spec, gpu)
            except Exception as exc:  # a config that does not fit memory names itself
                from omniplane.perf import InfeasibleConfig

                assert isinstance(exc, InfeasibleConfig), (spec.name, gpu.name, exc)
                continue
            assert cols and all(c.requests_per_s > 0 for c in cols.values()), (spec.name, gpu.name)


def test_video_frames_are_resized_within_each_models_bounds(specs: dict[str, ModelSpec]) -> None:
    """Qwen's smart_resize: sides multiples of patch x merge, the area inside the catalog's
    per-frame bounds (and, for Qwen3-VL, inside its budget over all frames)."""
    from omniplane.repro.capacity import resized_frame

    q3o = specs["qwen3-omni"].component("video_encoder")
    q25o = specs["qwen2.5-omni"].component("vision_encoder")
    q25vl = specs["qwen2.5-vl"].component("vision_encoder")
    q3vl = specs["qwen3-vl"].component("vision_encoder")
    for comp, side, cap in ((q3o, 32, 768 * 32 * 32), (q25o, 28, 768 * 28 * 28)):
        px = resized_frame(comp, 1920, 1080, 32)
        assert px <= cap and px > 0.8 * cap  # scaled down to (just under) the bound
        rounded = round(480 / side) * side * round(854 / side) * side
        assert resized_frame(comp, 854, 480, 32) == pytest.approx(rounded)
        assert resized_frame(comp, 64, 64, 32) >= comp.size.frame_min_pixels  # scaled up
    assert resized_frame(q25vl, 1920, 1080, 32) == 1092 * 1932  # no bound binds: rounded to 28 px
    budget = q3vl.size.video_max_pixels
    assert resized_frame(q3vl, 1920, 1080, 32) <= budget / 32
    assert resized_frame(q3vl, 1920, 1080, 8) > resized_frame(q3vl, 1920, 1080, 32)  # fewer frames, larger


def test_encoders_hand_off_what_their_llm_receives(specs: dict[str, ModelSpec], gpus: GPUCatalog) -> None:
    """Embedding bytes per token = the LLM's hidden x the encoder's output streams x 2 B; the
    cornserve runtime prices their hand-off, so Qwen3-VL's image encoder (4 x 5120 per token)
    is slower than Qwen3-Omni's (4 x 2048) on the same images, and a runtime without the
    factor prices them alike."""
    q3vl, q3o = CostModel(specs["qwen3-vl"]), CostModel(specs["qwen3-omni"])
    assert q3vl.shape("vision_encoder").output_bytes_per_token == 4 * 5120 * 2
    assert q3o.shape("image_encoder").output_bytes_per_token == 4 * 2048 * 2
    assert CostModel(specs["qwen2.5-vl"]).shape("vision_encoder").output_bytes_per_token == 3584 * 2
    assert q3o.shape("thinker").output_bytes_per_token == 0.0
    cfg = ExecutorConfig(gpus.get("A100-80GB"), 1, 32)
    assert q3vl.runtime.encoder_s_per_output_mb > 0

    def ratio(a: CostModel, b: CostModel) -> float:
        return (a.encoder_time("vision_encoder", cfg, 32, 32 * 800)
                / b.encoder_time("image_encoder", cfg, 32, 32 * 800))

    no_handoff = q3vl.runtime.with_factors(encoder_s_per_output_mb=0.0)
    plain = ratio(CostModel(specs["qwen3-vl"], runtime=no_handoff),
                  CostModel(specs["qwen3-omni"], runtime=no_handoff))
    assert ratio(q3vl, q3o) > plain * 1.1  # the extra 3 x 3072 values per token, handed off


def test_table2_median_and_cells_within_30_percent(table2: dict[str, dict[str, float]]) -> None:
    """All 21 cells: the median target of issue 13 (15%); 17 of 21 within 30% (docs/results/perf.md
    names the four that miss and why)."""
    rows = anchors()["cornfigurator_table2"]["rows"]
    errs = [abs(table2[m][c] / v - 1) for m, row in rows.items() for c, v in row.items()]
    assert len(errs) == 21 and statistics.median(errs) <= 0.15
    assert sum(e <= 0.30 for e in errs) >= 17


def test_frame_bounds_are_validated() -> None:
    from pydantic import ValidationError

    from omniplane.spec.component import Size

    with pytest.raises(ValidationError, match=r"frame_min_pixels .* must be <= frame_max_pixels"):
        Size(params=1e9, frame_min_pixels=1000, frame_max_pixels=10, source="assumption: test")
