"""Requests written for replay read back equal; a bad request file names its lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from omniplane.spec import find_catalog_workload, load_workload
from omniplane.workload import Request, TraceError, generate, load_requests, rebase, save_requests


def test_round_trip_through_jsonl(tmp_path: Path) -> None:
    for name in ("qwen3-omni-servegen", "qwen2.5-omni-mooncake"):
        path = find_catalog_workload(name)
        assert path is not None
        reqs = generate(load_workload(path), n=200)
        out = tmp_path / f"{name}.jsonl"
        assert save_requests(out, reqs) == 200
        assert load_requests(out) == reqs


def test_bad_request_lines_are_named(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(
        '{"id": 0, "arrival": 0.0, "type": "t2t", "work": {"llm": {"prompt_tokens": 5}}}\n'
        '{"id": 1, "arrival": 1.0, "type": "t2t"}\n'
        '{"id": 2, "arrival": -1, "type": "t2t", "work": {}}\n'
        'garbage\n'
        '{"id": 4, "arrival": 2.0, "type": "t2t", "work": {"llm": {"output_tokens": -3}}}\n'
        '{"id": 5, "arrival": 3.0, "type": "t2t", "work": {"llm": {"output_tokens": 3}}}\n')
    with pytest.raises(TraceError) as info:
        load_requests(path)
    err = info.value
    assert [i.line for i in err.issues] == [2, 3, 4, 5]
    assert f"{path}:2: missing key 'work'" in str(err)
    assert err.partial_requests is not None and [r.id for r in err.partial_requests] == [0, 5]


def test_rebase_windows_and_renumbers() -> None:
    reqs = [Request(i, float(t), "t2t", {}) for i, t in enumerate([0, 5, 10, 15])]
    out = rebase(reqs, 5.0, 15.0)
    assert [(r.id, r.arrival) for r in out] == [(0, 0.0), (1, 5.0)]


def test_requests_hash_and_compare_by_value() -> None:
    a = Request(0, 1.0, "t2t", {"llm": {"prompt_tokens": 3.0}})
    b = Request(0, 1.0, "t2t", {"llm": {"prompt_tokens": 3.0}})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.meta == {}
