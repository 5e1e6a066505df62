"""generate(): deterministic runs from a workload spec, rate and mix overrides, trace replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.spec import catalog_workload_paths, find_catalog_workload, load_workload
from omniplane.workload import Request, TraceError, generate, load_trace
from omniplane.workload.stats import gap_stats


def catalog(name: str):  # type: ignore[no-untyped-def]
    path = find_catalog_workload(name)
    assert path is not None
    return load_workload(path)


def write_workload(tmp_path: Path, doc: dict[str, Any], name: str = "w.yaml"):  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_workload(path)


def check_run(reqs: list[Request], model_types: list[str]) -> None:
    assert [r.id for r in reqs] == list(range(len(reqs)))
    times = [r.arrival for r in reqs]
    assert times == sorted(times) and times[0] >= 0
    assert {r.type for r in reqs} <= set(model_types)


def test_same_seed_same_requests_other_seed_differs() -> None:
    wl = catalog("qwen3-omni-servegen")
    a, b = generate(wl, n=500), generate(wl, n=500)
    c = generate(wl, n=500, seed=1)
    assert a == b
    assert [r.arrival for r in a] != [r.arrival for r in c]
    assert [r.work for r in a] != [r.work for r in c]
    check_run(a, wl.model.type_names)


def test_mix_fractions_and_spec_duration() -> None:
    wl = catalog("qwen2.5-omni-horizon")
    reqs = generate(wl, duration_s=20_000)
    check_run(reqs, wl.model.type_names)
    assert reqs[-1].arrival < 20_000
    assert len(reqs) / 20_000 == pytest.approx(0.35, rel=0.05)
    mix = wl.spec.mix or {}
    for t, f in mix.items():
        share = sum(r.type == t for r in reqs) / len(reqs)
        assert share == pytest.approx(f, abs=4 * np.sqrt(f * (1 - f) / len(reqs)) + 1e-3)
    default = generate(wl)
    assert default[-1].arrival < wl.spec.duration_s  # the spec's 900 s


def test_rate_override_keeps_the_cv() -> None:
    wl = catalog("qwen3-omni-servegen")  # gamma, rate 4, cv 0.8
    reqs = generate(wl, n=20_000, rate=25.0)
    rate, cv = gap_stats(np.array([r.arrival for r in reqs]))
    assert rate == pytest.approx(25.0, rel=0.03)
    assert cv == pytest.approx(0.8, rel=0.04)
    doubled = generate(wl, n=20_000, rate=25.0, rate_scale=2.0)
    assert gap_stats(np.array([r.arrival for r in doubled]))[0] == pytest.approx(50.0, rel=0.03)


def test_mix_override_moves_types_not_arrivals() -> None:
    wl = catalog("qwen3-omni-servegen")
    base = generate(wl, n=2000)
    text_only = generate(wl, n=2000, mix={"ti2t": 1.0})
    assert {r.type for r in text_only} == {"ti2t"}
    assert [r.arrival for r in base] == [r.arrival for r in text_only]
    with pytest.raises(ValueError, match="unknown request type"):
        generate(wl, n=10, mix={"t2z": 1.0})
    with pytest.raises(ValueError, match="sum to 1"):
        generate(wl, n=10, mix={"ti2t": 0.5})


def test_sizes_overrides_of_the_spec_apply(tmp_path: Path) -> None:
    doc = {"kind": "workload", "name": "w", "model": "qwen3-vl", "mix": {"t2t": 1.0},
           "arrival": {"process": "poisson", "rate": 1.0},
           "sizes": {"t2t": {"llm": {"output_tokens": 77}}}}
    reqs = generate(write_workload(tmp_path, doc), n=50)
    assert {r.work["llm"]["output_tokens"] for r in reqs} == {77.0}


def test_no_length_is_an_error(tmp_path: Path) -> None:
    doc = {"kind": "workload", "name": "w", "model": "qwen3-vl", "mix": {"t2t": 1.0},
           "arrival": {"process": "poisson", "rate": 1.0}}
    with pytest.raises(ValueError, match="give duration_s or n"):
        generate(write_workload(tmp_path, doc))


@pytest.mark.parametrize("path", catalog_workload_paths(), ids=lambda p: p.stem)
def test_every_catalog_workload_generates(path: Path) -> None:
    wl = load_workload(path)
    reqs = generate(wl, n=300)
    assert len(reqs) == 300
    check_run(reqs, wl.model.type_names)
    for r in reqs:
        assert set(r.work) == set(wl.model.path_of(r.type))


def test_azure_replay_keeps_trace_times_and_sizes() -> None:
    wl = catalog("qwen3-vl-azure-conv")
    reqs = generate(wl, duration_s=600)
    trace = load_trace("azure-conv")
    k = int(np.searchsorted(trace.arrival, 600.0))
    assert len(reqs) == k
    assert [r.arrival for r in reqs] == trace.arrival[:k].tolist()
    for r, p, o in zip(reqs, trace.fields["prompt_tokens"], trace.fields["output_tokens"], strict=False):
        image = r.work.get("vision_encoder", {}).get("tokens", 0.0)
        assert r.work["llm"]["prompt_tokens"] == p + image
        assert r.work["llm"]["output_tokens"] == o
        assert r.meta["prompt_tokens"] == p
    assert np.mean([r.type == "ti2t" for r in reqs]) == pytest.approx(0.5, abs=0.06)


def test_trace_rate_override_compresses_time() -> None:
    wl = catalog("qwen3-vl-azure-conv")
    trace = load_trace("azure-conv")
    reqs = generate(wl, n=len(trace), rate=20.0)
    assert len(reqs) / reqs[-1].arrival == pytest.approx(20.0, rel=1e-9)
    assert [r.work["llm"]["output_tokens"] for r in reqs[:50]] == trace.fields["output_tokens"][:50].tolist()
    with pytest.raises(ValueError, match="asked for"):
        generate(wl, n=len(trace) + 1)
    within = generate(wl, n=10_000, duration_s=60.0)  # both: at most n within the duration
    assert len(within) == int(np.searchsorted(trace.arrival, 60.0))


def test_mooncake_replay_keeps_hash_ids() -> None:
    reqs = generate(catalog("qwen2.5-omni-mooncake"), n=100)
    trace = load_trace("mooncake-conversation")
    assert [r.meta["hash_ids"] for r in reqs] == trace.meta["hash_ids"][:100]
    assert {r.type for r in reqs} <= {"t2t", "t2a"}


def test_servegen_trace_workload_rate_and_window() -> None:
    wl = catalog("qwen3-omni-servegen-trace")
    reqs = generate(wl, duration_s=600, rate=30.0)
    assert len(reqs) / 600 == pytest.approx(30.0, rel=0.1)
    for r in reqs:
        if r.meta["image_count"] > 0:
            assert r.work["image_encoder"]["items"] == r.meta["image_count"]
            assert r.work["thinker"]["output_tokens"] == r.meta["output_tokens"]
    late = generate(wl, n=100, seed=3)
    assert late != generate(wl, n=100, seed=4)


def test_user_csv_trace_with_type_column(tmp_path: Path) -> None:
    (tmp_path / "mine.csv").write_text(
        "arrival_s,type,prompt_tokens,output_tokens\n10,t2t,100,20\n11,ti2t,50,5\n13,t2t,70,9\n")
    doc = {"kind": "workload", "name": "mine", "model": "qwen3-vl",
           "arrival": {"process": "trace", "trace": "mine.csv", "format": "csv", "start_s": 10,
                       "time_scale": 2.0,
                       "mapping": {"type_column": "type",
                                   "sizes": {"llm.prompt_tokens": "prompt_tokens",
                                             "llm.output_tokens": "output_tokens"}}}}
    reqs = generate(write_workload(tmp_path, doc))
    assert [(r.arrival, r.type, r.work["llm"]["output_tokens"]) for r in reqs] == [
        (0.0, "t2t", 20.0), (2.0, "ti2t", 5.0), (6.0, "t2t", 9.0)]


def test_a_malformed_user_trace_fails_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text(
        '{"arrival_s": 1, "type": "t2t"}\n{"arrival_s": 0.5, "type": "t2t"}\n')
    doc = {"kind": "workload", "name": "bad", "model": "qwen3-vl",
           "arrival": {"process": "trace", "trace": "bad.jsonl", "format": "jsonl",
                       "mapping": {"type_column": "type"}}}
    with pytest.raises(TraceError, match=r"bad\.jsonl:2: arrival_s"):
        generate(write_workload(tmp_path, doc))


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 400), seed=st.integers(0, 10**9), rate=st.floats(0.01, 1000.0))
def test_runs_are_ordered_and_deterministic(n: int, seed: int, rate: float) -> None:
    wl = catalog("qwen3-omni-servegen")
    a = generate(wl, n=n, seed=seed, rate=rate)
    assert len(a) == n and a == generate(wl, n=n, seed=seed, rate=rate)
    check_run(a, wl.model.type_names)
