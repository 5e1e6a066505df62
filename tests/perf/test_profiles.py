"""Profile tables: round trip, malformed input, interpolation, and precedence over the roofline."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniplane.perf import (
    CostModel,
    ExecutorConfig,
    OutsideProfile,
    ProfileFormatError,
    ProfileRow,
    ProfileSet,
)
from omniplane.perf.profiles import COLUMNS, OPS
from omniplane.spec import GPUCatalog

HEADER = ",".join(COLUMNS) + ",source\n"

rows_st = st.lists(
    st.builds(
        ProfileRow,
        component=st.sampled_from(["thinker", "talker", "dit"]),
        gpu=st.sampled_from(["H100-SXM", "A100-80GB"]),
        tp=st.sampled_from([1, 2, 4]),
        op=st.sampled_from(OPS),
        batch=st.integers(1, 512),
        size=st.floats(0.001, 1e7, allow_nan=False, allow_infinity=False),
        latency_ms=st.floats(1e-3, 1e6, allow_nan=False, allow_infinity=False),
        source=st.sampled_from(["", "measured: test", "measured: a, with comma"]),
    ),
    max_size=30,
    unique_by=lambda r: (r.component, r.gpu, r.tp, r.op, r.batch, r.size),
)


@given(rows=rows_st)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_tables_round_trip(tmp_path: Path, rows: list[ProfileRow]) -> None:
    path = tmp_path / "t.csv"
    ProfileSet(rows).save(path)
    assert list(ProfileSet.load(path).rows) == rows


def _write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    p = tmp_path / "bad.csv"
    p.write_text(header + body)
    return p


@pytest.mark.parametrize(("body", "row", "column", "what"), [
    ("thinker,H100-SXM,1,decode,4,100,abc,\n", 2, "latency_ms", "number"),
    ("thinker,H100-SXM,3,decode,4,100,5,\n", 2, "tp", "power of two"),
    ("thinker,H100-SXM,1,decodes,4,100,5,\n", 2, "op", "expected one of"),
    ("thinker,H100-SXM,1,decode,2.5,100,5,\n", 2, "batch", "whole number"),
    ("thinker,H100-SXM,1,decode,4,-1,5,\n", 2, "size", "> 0"),
    (",H100-SXM,1,decode,4,100,5,\n", 2, "component", "component name"),
    ("thinker,H100-SXM,1,decode,4,100\n", 2, "-", "expected 8 fields"),
    ("thinker,H100-SXM,1,decode,4,100,5,\nthinker,H100-SXM,1,decode,4,100,6,\n", 3, "size",
     "already given on row 3"),
])
def test_malformed_rows_name_file_row_and_column(tmp_path: Path, body: str, row: int, column: str,
                                                 what: str) -> None:
    path = _write(tmp_path, "thinker,H100-SXM,1,prefill,1,10,3,\n" + body)
    with pytest.raises(ProfileFormatError) as info:
        ProfileSet.load(path)
    msg = str(info.value)
    assert f"{path}:row {row + 1}:column {column}:" in msg
    assert what in msg


def test_bad_header_names_the_missing_and_unknown_columns(tmp_path: Path) -> None:
    path = _write(tmp_path, "", header="component,gpu,tp,op,batch,size,latency,notes\n")
    with pytest.raises(ProfileFormatError) as info:
        ProfileSet.load(path)
    msg = str(info.value)
    assert f"{path}:row 1:column latency_ms: missing column" in msg
    assert f"{path}:row 1:column notes: unknown column" in msg


def test_every_bad_row_is_reported_at_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "thinker,H100-SXM,1,decode,x,100,5,\nthinker,H100-SXM,1,decode,4,100,y,\n")
    with pytest.raises(ProfileFormatError) as info:
        ProfileSet.load(path)
    assert len(info.value.problems) == 2


def _grid() -> ProfileSet:
    rows = [ProfileRow("thinker", "H100-SXM", 1, "decode", b, s, lat)
            for b, s, lat in [(1, 100, 10.0), (1, 200, 20.0), (4, 100, 30.0), (4, 200, 50.0)]]
    return ProfileSet(rows)


def test_interpolation_is_linear_in_batch_and_size() -> None:
    ps, names = _grid(), ("H100-SXM",)
    assert ps.lookup("thinker", names, 1, "decode", 1, 100).latency_s == pytest.approx(0.010)
    assert ps.lookup("thinker", names, 1, "decode", 1, 150).latency_s == pytest.approx(0.015)
    # batch 2 is a third of the way from 1 to 4: size 150 -> 15 + (40 - 15) / 3 ms
    hit = ps.lookup("thinker", names, 1, "decode", 2, 150)
    assert hit.inside and hit.latency_s == pytest.approx((15 + 25 / 3) / 1e3)
    out = ps.lookup("thinker", names, 1, "decode", 8, 300)
    assert not out.inside and (out.batch, out.size) == (4, 200)


def test_cost_model_uses_the_table_inside_and_records_fallbacks_outside(costs: dict[str, CostModel],
                                                                         gpus: GPUCatalog) -> None:
    base = costs["qwen2.5-omni"]
    cfg = ExecutorConfig(gpus.get("h100"), 1)  # an alias reaches the table written for H100-SXM
    cost = CostModel(base.model, profiles=_grid(), runtime="roofline")
    assert cost.source_of("thinker", cfg, "decode") == "profile"
    assert cost.source_of("thinker", cfg, "prefill") == "roofline"
    assert cost.decode_step_time("thinker", cfg, 1, 150) == pytest.approx(0.015)
    assert cost.decode_step_time("thinker", cfg, 4, 4 * 200) == pytest.approx(0.050)
    assert cost.fallbacks() == []
    # outside: the roofline scaled to the nearest measured point (batch 4, size 200)
    roof = base.decode_step_time("thinker", cfg, 16, 16 * 1000)
    anchor = base.decode_step_time("thinker", cfg, 4, 4 * 200)
    assert cost.decode_step_time("thinker", cfg, 16, 16 * 1000) == pytest.approx(roof * 0.050 / anchor)
    [fb] = cost.fallbacks()
    assert (fb.component, fb.op, fb.batch, fb.size, fb.anchor_batch, fb.anchor_size) == (
        "thinker", "decode", 16, 1000, 4, 200)
    # prefill and other components still come from the roofline
    assert cost.prefill_time("thinker", cfg, 300) == base.prefill_time("thinker", cfg, 300)
    strict = CostModel(base.model, profiles=_grid(), strict_profiles=True, runtime="roofline")
    with pytest.raises(OutsideProfile, match="nearest measured point: batch 4, size 200"):
        strict.decode_step_time("thinker", cfg, 16, 16 * 1000)


def test_prefill_and_mixed_iterations_with_tables(costs: dict[str, CostModel], gpus: GPUCatalog) -> None:
    base = costs["qwen2.5-omni"]
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    rows = [ProfileRow("thinker", "H100-SXM", 1, "prefill", 1, s, lat)
            for s, lat in [(100, 20.0), (900, 60.0)]]
    rows += [ProfileRow("thinker", "H100-SXM", 1, "decode", b, 500, lat)
             for b, lat in [(1, 10.0), (8, 12.0)]]
    cost = CostModel(base.model, profiles=ProfileSet(rows), runtime="roofline")
    assert cost.prefill_time("thinker", cfg, 500) == pytest.approx(0.040)
    # cached context adds the roofline's extra attention to the measured empty-cache prefill
    extra = base.prefill_time("thinker", cfg, 500, 3000) - base.prefill_time("thinker", cfg, 500)
    assert extra > 0
    assert cost.prefill_time("thinker", cfg, 500, 3000) == pytest.approx(0.040 + extra)
    # a mixed iteration: both measured parts, the fixed per-iteration time counted once
    fixed = base.efficiency(cfg).layer_s * base.shape("thinker").layers
    mixed = cost.llm_iteration_time("thinker", cfg, prefill_tokens=500, decode_batch=8, decode_context=4000)
    assert mixed == pytest.approx(0.040 + 0.012 - fixed)
    # the work handed to the co-location model is scaled to the measured time
    work = cost.llm_iteration_work("thinker", cfg, decode_batch=8, decode_context=4000)
    assert cost.time_of(work, cfg) == pytest.approx(0.012)


def test_generator_tables_take_precedence(costs: dict[str, CostModel], gpus: GPUCatalog) -> None:
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    rows = [ProfileRow("dit", "H100-SXM", 1, "dit_step", 1, s, lat)
            for s, lat in [(1024, 60.0), (4096, 240.0)]]
    cost = CostModel(costs["qwen-image"].model, profiles=ProfileSet(rows), runtime="roofline")
    assert cost.dit_step_time("dit", cfg, 1, 2048) == pytest.approx(0.120)
    assert cost.vae_time("vae", cfg, 1, 1e6) == costs["qwen-image"].vae_time("vae", cfg, 1, 1e6)
