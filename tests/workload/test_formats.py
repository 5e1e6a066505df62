"""Trace files: published counts of the shipped traces, and malformed files reported by line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniplane.workload import TraceError, infer_format, load_trace

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def test_shipped_traces_have_the_published_counts() -> None:
    # Azure/AzurePublicDataset AzureLLMInferenceTrace_{conv,code}.csv; kvcache-ai/Mooncake
    # FAST25-release/traces/conversation_trace.jsonl (data/README.md).
    conv, code = load_trace("azure-conv"), load_trace("azure-code")
    moon = load_trace("mooncake-conversation")
    assert (len(conv), len(code), len(moon)) == (19_366, 8_819, 12_031)
    for tr in (conv, code, moon):
        assert np.all(np.diff(tr.arrival) >= 0) and tr.arrival[0] == 0.0
        assert tr.fields["prompt_tokens"].min() > 0 and tr.fields["output_tokens"].min() > 0
        assert 3000 < tr.arrival[-1] < 3700  # about an hour each
    assert all(isinstance(h, tuple) for h in moon.meta["hash_ids"])
    assert moon.lines is not None and moon.lines[-1] == 12_031


def test_azure_first_rows_as_in_the_file() -> None:
    conv = load_trace("azure-conv")
    # rows 2 and 3 of the CSV: 18:15:46.6805900, 374, 44 and 18:15:50.9951690, 396, 109
    assert conv.fields["prompt_tokens"][:2].tolist() == [374.0, 396.0]
    assert conv.fields["output_tokens"][:2].tolist() == [44.0, 109.0]
    assert conv.arrival[1] == pytest.approx(50.995169 - 46.68059, abs=1e-6)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_azure_missing_column_names_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:00:00,5\n")
    with pytest.raises(TraceError) as info:
        load_trace(path, "azure")
    assert f"{path}:1: GeneratedTokens" in str(info.value)
    assert "missing column" in str(info.value)


def test_azure_bad_rows_are_all_reported_and_valid_rows_kept(tmp_path: Path) -> None:
    rows = [
        "2023-11-16 18:00:00.0,10,5",
        "2023-11-16 18:00:01.0,-3,5",  # line 3: negative length
        "2023-11-16 18:00:02.0,12,6",
        "2023-11-16 17:59:00.0,12,6",  # line 5: before the previous row
        "not a time,1,1",  # line 6
        "2023-11-16 18:00:03.0,14,abc",  # line 7
        "2023-11-16 18:00:04.0,15,7",
    ]
    path = write(tmp_path, "a.csv", AZURE_HEADER + "\n".join(rows) + "\n")
    with pytest.raises(TraceError) as info:
        load_trace(path, "azure")
    err = info.value
    assert [i.line for i in err.issues] == [3, 5, 6, 7]
    text = str(err)
    assert f"{path}:3: ContextTokens: negative value" in text
    assert f"{path}:5: TIMESTAMP:" in text and "before the previous" in text
    assert f"{path}:7: GeneratedTokens: expected a number" in text
    assert err.partial is not None
    assert err.partial.lines is not None and err.partial.lines.tolist() == [2, 4, 8]
    assert err.partial.fields["prompt_tokens"].tolist() == [10.0, 12.0, 15.0]


def test_mooncake_bad_json_line_and_missing_key(tmp_path: Path) -> None:
    lines = [
        json.dumps({"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}),
        '{"timestamp": 5, "input_length": 10,',  # line 2: broken JSON
        json.dumps({"timestamp": 6, "output_length": 2}),  # line 3: no input_length
        json.dumps({"timestamp": 7, "input_length": 11, "output_length": 3, "hash_ids": [0, 1]}),
    ]
    path = write(tmp_path, "m.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(TraceError) as info:
        load_trace(path, "mooncake")
    text = str(info.value)
    assert f"{path}:2: not valid JSON" in text
    assert f"{path}:3: input_length: missing key" in text
    partial = info.value.partial
    assert partial is not None and len(partial) == 2
    assert partial.arrival.tolist() == [0.0, 0.007] and partial.meta["hash_ids"][1] == (0, 1)


def test_user_csv_format(tmp_path: Path) -> None:
    path = write(tmp_path, "mine.csv",
                 "arrival_s,type,prompt_tokens,output_tokens,image_count,x_note\n"
                 "0.5,ti2t,100,20,1,hello\n"
                 "0.5,t2t,50,,0,\n"
                 "2.0,t2t,70,9,0,bye\n")
    assert infer_format(path) == "csv"
    tr = load_trace(path)
    assert tr.arrival.tolist() == [0.5, 0.5, 2.0]
    assert tr.meta["type"] == ["ti2t", "t2t", "t2t"] and tr.meta["x_note"][0] == "hello"
    assert np.isnan(tr.fields["output_tokens"][1])  # empty cell: not given
    assert tr.rows()[0] == {"prompt_tokens": 100.0, "output_tokens": 20.0, "image_count": 1.0,
                            "type": "ti2t", "x_note": "hello"}


def test_user_csv_missing_time_column_and_negative_value(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.csv", "time,prompt_tokens\n1,2\n")
    with pytest.raises(TraceError, match=r"bad\.csv:1: arrival_s: missing column"):
        load_trace(path, "csv")
    path = write(tmp_path, "neg.csv", "arrival_s,prompt_tokens\n1,2\n2,-1\n3,4\n")
    with pytest.raises(TraceError, match=r"neg\.csv:3: prompt_tokens: negative value") as info:
        load_trace(path, "csv")
    assert info.value.partial is not None and len(info.value.partial) == 2


def test_user_csv_ragged_row(tmp_path: Path) -> None:
    path = write(tmp_path, "r.csv", "arrival_s,prompt_tokens\n1,2\n2,3,4\n3\n")
    with pytest.raises(TraceError) as info:
        load_trace(path, "csv")
    assert [i.line for i in info.value.issues] == [3, 4]


def test_user_jsonl_format_and_errors(tmp_path: Path) -> None:
    good = write(tmp_path, "mine.jsonl",
                 '{"arrival_s": 0, "type": "t2t", "prompt_tokens": 7, "hash_ids": [1, 2]}\n'
                 '\n'
                 '{"arrival_s": 1.5, "type": "t2t", "output_tokens": 3}\n')
    assert infer_format(good) == "jsonl"
    tr = load_trace(good)
    assert tr.lines is not None and tr.lines.tolist() == [1, 3]
    assert tr.meta["hash_ids"] == [(1, 2), None]
    assert np.isnan(tr.fields["prompt_tokens"][1])
    bad = write(tmp_path, "bad.jsonl",
                '{"arrival_s": 3}\n[1, 2]\n{"arrival_s": "x"}\n{"arrival_s": 1}\n{"prompt_tokens": 1}\n')
    with pytest.raises(TraceError) as info:
        load_trace(bad)
    assert [i.line for i in info.value.issues] == [2, 3, 4, 5]
    assert "before the previous" in info.value.issues[2].message


def test_empty_trace_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no rows"):
        load_trace(write(tmp_path, "e.csv", "arrival_s,prompt_tokens\n"), "csv")


def test_unknown_trace_name_or_format(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a shipped trace"):
        load_trace("no-such-trace")
    path = write(tmp_path, "t.txt", "x")
    with pytest.raises(ValueError, match="cannot tell the format"):
        load_trace(path)
    with pytest.raises(ValueError, match="unknown trace format"):
        load_trace(path, "parquet")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gaps=st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=40),
       sizes=st.lists(st.integers(0, 10**6), min_size=40, max_size=40))
def test_user_trace_round_trips_through_csv_and_jsonl(tmp_path: Path, gaps: list[float],
                                                      sizes: list[int]) -> None:
    times = np.cumsum(gaps)
    csv_rows = "".join(f"{t!r},{s}\n" for t, s in zip(times.tolist(), sizes, strict=False))
    csv_path = write(tmp_path, "p.csv", "arrival_s,prompt_tokens\n" + csv_rows)
    jsonl_path = write(tmp_path, "p.jsonl", "".join(
        json.dumps({"arrival_s": t, "prompt_tokens": s}) + "\n"
        for t, s in zip(times.tolist(), sizes, strict=False)))
    for path in (csv_path, jsonl_path):
        tr = load_trace(path)
        assert tr.arrival.tolist() == times.tolist()
        assert tr.fields["prompt_tokens"].tolist() == [float(s) for s in sizes[: len(times)]]
