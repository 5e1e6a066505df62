"""ServeGen mm-image: 35 clients, the published aggregate rate, sampling, and safe parsing."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from omniplane.spec.catalog import data_dir
from omniplane.workload import TraceError, load_servegen, load_trace
from omniplane.workload.servegen import WINDOW_S

SERVEGEN = data_dir() / "servegen-mm-image"


def published_total_rate() -> np.ndarray:
    """Sum over the chunk-N-trace.csv files of the rate column, per 600 s window, read here
    with the csv module (independently of the loader)."""
    total = np.zeros(144)
    for path in SERVEGEN.glob("chunk-*-trace.csv"):
        with path.open() as f:
            for row in csv.reader(f):
                total[int(float(row[0]) // 600)] += float(row[1])
    return total


def test_thirty_five_clients_and_the_published_total_rate() -> None:
    data = load_servegen(SERVEGEN)
    assert len(data.clients) == 35
    assert sorted(c.id for c in data.clients) == list(range(35))
    assert data.end_s == 86_400
    starts, total = data.total_rate()
    assert len(starts) == 144
    np.testing.assert_allclose(total, published_total_rate(), rtol=1e-12)
    # docs/reference/workloads.md: 4.85 to 13.29 req/s per window, 9.47 req/s over the day
    assert 4.8 < total.min() < 4.9 and 13.2 < total.max() < 13.3
    assert data.mean_rate() == pytest.approx(9.4747, abs=1e-3)


def test_a_realised_hour_has_the_published_rate() -> None:
    data = load_servegen(SERVEGEN)
    start, end = 36_000.0, 39_600.0
    tr = data.sample(np.random.default_rng(0), start_s=start, end_s=end)
    expected = published_total_rate()[60:66].sum() * WINDOW_S
    assert tr.arrival.min() >= start and tr.arrival.max() < end
    assert len(tr) == pytest.approx(expected, rel=0.05)
    assert np.all(np.diff(tr.arrival) >= 0)
    assert set(tr.meta["client"]) <= set(range(35))


def test_sizes_come_from_the_client_pmfs() -> None:
    data = load_servegen(SERVEGEN).select([0])
    tr = data.sample(np.random.default_rng(1), start_s=0, end_s=3600)
    # chunk-0-dataset.json, window "0": text_tokens is {136: 0.2557..., 372: 0.7443...}
    assert set(tr.fields["text_tokens"].tolist()) <= {136.0, 372.0}
    assert np.mean(tr.fields["text_tokens"] == 372.0) == pytest.approx(0.744, abs=0.05)
    assert set(tr.fields["image_count"].tolist()) == {1.0}
    np.testing.assert_array_equal(tr.fields["image_tokens_total"],
                                  tr.fields["image_tokens"] * tr.fields["image_count"])


def test_first_n_is_exact_and_deterministic() -> None:
    data = load_servegen(SERVEGEN)
    a = data.sample(np.random.default_rng(2), start_s=1000.0, n=500)
    b = data.sample(np.random.default_rng(2), start_s=1000.0, n=500)
    c = data.sample(np.random.default_rng(3), start_s=1000.0, n=500)
    assert len(a) == 500 and a.arrival.min() >= 1000.0
    assert np.array_equal(a.arrival, b.arrival) and not np.array_equal(a.arrival, c.arrival)
    with pytest.raises(ValueError, match="asked up to"):
        data.sample(np.random.default_rng(0), start_s=0, end_s=90_000)


def test_rate_scale_scales_the_count() -> None:
    data = load_servegen(SERVEGEN)
    base = data.sample(np.random.default_rng(4), start_s=0, end_s=1800)
    triple = data.sample(np.random.default_rng(4), start_s=0, end_s=1800, rate_scale=3.0)
    assert len(triple) / len(base) == pytest.approx(3.0, rel=0.1)


def test_load_trace_gives_a_seeded_day() -> None:
    tr = load_trace("servegen-mm-image", seed=0)
    assert len(tr) == pytest.approx(published_total_rate().sum() * WINDOW_S, rel=0.02)
    assert tr.format == "servegen" and tr.lines is None


def copy_client(tmp_path: Path, cid: int = 0) -> Path:
    folder = tmp_path / "sg"
    folder.mkdir(parents=True)
    for suffix in ("trace.csv", "dataset.json"):
        shutil.copy(SERVEGEN / f"chunk-{cid}-{suffix}", folder / f"chunk-{cid}-{suffix}")
    return folder


def test_a_code_string_in_a_pmf_is_rejected_not_run(tmp_path: Path) -> None:
    folder = copy_client(tmp_path)
    data = json.loads((folder / "chunk-0-dataset.json").read_text())
    marker = tmp_path / "ran"
    data["0"]["output_tokens"] = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    (folder / "chunk-0-dataset.json").write_text(json.dumps(data))
    with pytest.raises(TraceError, match=r"0\.output_tokens: not a Python dict literal"):
        load_servegen(folder)
    assert not marker.exists()


def test_bad_pmf_sum_and_bad_window_row_are_named(tmp_path: Path) -> None:
    folder = copy_client(tmp_path)
    data = json.loads((folder / "chunk-0-dataset.json").read_text())
    data["21600"]["text_tokens"] = "{10: 0.5, 20: 0.2}"
    (folder / "chunk-0-dataset.json").write_text(json.dumps(data))
    with pytest.raises(TraceError, match=r"21600\.text_tokens: probabilities sum to 0\.7"):
        load_servegen(folder)
    folder2 = copy_client(tmp_path / "b")
    lines = (folder2 / "chunk-0-trace.csv").read_text().splitlines()
    lines[4] = "2400,-1,0.5,Gamma,1,1"
    lines[6] = "3600,1,0.5,Pareto,1,1"
    (folder2 / "chunk-0-trace.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as info:
        load_servegen(folder2)
    assert [i.line for i in info.value.issues] == [5, 7]
    assert "chunk-0-trace.csv:7: pattern must be Gamma, Weibull or empty" in str(info.value)


def test_unknown_client_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"no client\(s\) \[99\]"):
        load_servegen(SERVEGEN).select([99])
