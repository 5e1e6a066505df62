"""The vLLM blog and SGLang-Omni checks: provenance for every number, bad files named, and a
section whose predictions are deterministic and behave as the model says they should."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from omniplane.perf.factors import Calibration, load_calibration
from omniplane.repro.validation.external_sources import (
    GRAPHS,
    _row,
    blog_frames_per_s,
    external_data,
    external_section,
    load_external,
    talker_cap_frames_per_s,
    value,
)
from omniplane.repro.validation.markdown import external_tables
from omniplane.repro.validation.points import Context


@pytest.fixture(scope="module")
def section() -> dict[str, Any]:
    s = external_section(Context(), load_calibration())
    assert s is not None
    return s


def test_every_number_has_a_source_with_repository_commit_and_path() -> None:
    data = external_data()
    assert {"vllm-blog-2026-07-01", "sglang-omni-sm-cap", "sglang-omni-qwen3-omni"} <= set(data["sources"])
    for s in data["sources"].values():
        assert re.fullmatch(r"[0-9a-f]{40}", s["commit"]) and "/" in s["repository"] and s["path"]
    blog = data["sources"]["vllm-blog-2026-07-01"]
    assert blog["url"].startswith("https://") and blog["date"] == "2026-07-01"
    for p in data["points"]:
        assert p["source"] in data["sources"] and p["where"] and isinstance(p["value"], (int, float))
    assert {p["id"].split("/")[1] for p in data["points"] if p["id"].startswith("blog/c")} == {"c32", "c64"}


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["points"][0].update(source="nowhere"), r"points\[.*\]\.source: expected one of"),
    (lambda d: d["sources"]["sglang-omni-sm-cap"].pop("commit"),
     r"sources\[sglang-omni-sm-cap\]: missing 'commit'"),
    (lambda d: d["points"][1].update(value="8.6"), r"points\[.*\]\.value: expected a number"),
    (lambda d: d.update(split="fit"), r"split: expected 'check'"),
])
def test_a_bad_file_is_named_with_the_field(tmp_path: Path, edit: Any, message: str) -> None:
    data = json.loads(json.dumps(external_data()))
    edit(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=re.escape(str(bad)) + ".*" + message):
        load_external(bad)


def test_the_section_is_deterministic_and_every_row_cites_known_points(section: dict[str, Any]) -> None:
    again = external_section(Context(), load_calibration())
    assert again == section
    ids = {p["id"] for p in external_data()["points"]}
    for r in section["rows"]:
        assert r["points"] and set(r["points"]) <= ids and r["assumption"]
        if r["rel_error"] is None:
            assert r["assumption"].startswith("not comparable")
        else:
            assert r["rel_error"] == pytest.approx(r["predicted"] / r["measured"] - 1.0, abs=1e-3)
    assert section["compared"] >= 6 and section["not_comparable"] >= 3
    assert all(r["assumption"].startswith("not comparable") for r in section["rows"]
               if r["predicted"] is None)


def test_the_ratios_go_the_way_the_model_says(section: dict[str, Any]) -> None:
    rows = {r["check"]: r for r in section["rows"]}
    speedup = rows["CUDA graph: req/s speed-up, c64"]["predicted"]
    assert speedup > 1.0  # an eager runtime is slower than a graph-captured one
    assert rows["CUDA graph: RTF ratio, c64"]["predicted"] == pytest.approx(1.0 / speedup, rel=1e-3)
    gain = rows["async output: req/s speed-up, c64"]["predicted"]
    gap = (value("blog/talker_step_gap_sync_ms") - value("blog/talker_step_gap_async_ms")) / 1e3
    assert 1.0 < gain < 1.0 + gap / 1e-3  # the gap added to a step of at least 1 ms
    assert rows["H200 SM count (catalog)"]["rel_error"] == 0.0
    # a co-runner never makes a stage faster
    assert rows["talker shares the thinker's GPU: wall-clock shared / alone, c8"]["predicted"] >= 1.0
    assert rows["code2wav on the thinker's GPU vs its own: thinker step ratio, c8"]["predicted"] >= 1.0


def test_the_markdown_lists_every_check(section: dict[str, Any]) -> None:
    lines = external_tables({"external_sources": section})
    assert sum(line.startswith("| ") for line in lines) == len(section["rows"]) + 1
    assert any("not comparable" in line for line in lines)


def test_a_row_left_uncompared_must_say_why() -> None:
    with pytest.raises(ValueError, match="must say why"):
        _row("x", "vllm-blog-2026-07-01", 1.0, 2.0, "talker-bound", ["blog/c64/batch/rtf"], comparable=False)
    r = _row("x", "vllm-blog-2026-07-01", 1.0, 2.0, "not comparable: a reason", ["blog/c64/batch/rtf"],
             comparable=False)
    assert r["rel_error"] is None and r["predicted"] == 2.0


def test_the_blog_throughput_is_its_concurrency_over_rtf() -> None:
    # 64 requests in flight, each gaining 1 / RTF seconds of audio a second, 12.5 frames a second
    assert blog_frames_per_s("cuda_graph") == pytest.approx(64 * 12.5 / value("blog/c64/cuda_graph/rtf"))
    assert blog_frames_per_s("async_output") > blog_frames_per_s("async_chunk")


def _with_seq_pass(cal: Calibration, seq_pass: float) -> Calibration:
    rts = dict(cal.runtimes)
    rts[GRAPHS] = dataclasses.replace(rts[GRAPHS], mtp_seq_pass_s=seq_pass)
    return dataclasses.replace(cal, runtimes=rts)


def test_the_absolute_rtf_is_compared_exactly_when_the_talker_could_reach_the_blogs_rate() -> None:
    cal = load_calibration()
    same_mode = blog_frames_per_s("cuda_graph")
    for seq_pass, comparable in ((2.0 / (15 * same_mode), False), (0.5 / (15 * same_mode), True)):
        c = _with_seq_pass(cal, seq_pass)
        assert (talker_cap_frames_per_s(c, 15) >= same_mode) is comparable
        s = external_section(Context(), c)
        assert s is not None
        row = next(r for r in s["rows"] if r["check"] == "RTF, async output, c64 (absolute)")
        assert (row["rel_error"] is not None) is comparable
        assert row["assumption"].startswith("not comparable") is not comparable
