"""Trace rows onto request types: modalities present, extra inputs, output fractions, errors."""

from __future__ import annotations

import numpy as np
import pytest

from omniplane.spec import TraceMapping, load_model
from omniplane.workload import Trace, TraceError, assign_types, given_sizes

OMNI = load_model("qwen3-omni")
VL = load_model("qwen3-vl")


def trace(n: int, **fields: list[float]) -> Trace:
    return Trace("t.csv", "csv", np.arange(float(n)),
                 {k: np.asarray(v, dtype=float) for k, v in fields.items()},
                 {}, np.arange(2, n + 2))


def test_image_count_picks_image_input() -> None:
    tr = trace(4, image_count=[0, 1, 3, 0])
    m = TraceMapping(output_fractions={"text": 1.0})
    types = assign_types(tr, VL, m, np.random.default_rng(0), None)
    assert types.tolist() == ["t2t", "ti2t", "ti2t", "t2t"]


def test_extra_inputs_and_output_fractions_follow_their_probabilities() -> None:
    n = 20_000
    tr = trace(n, image_count=[1] * n)
    m = TraceMapping(extra_inputs={"video": 0.5, "audio": 0.5},
                     output_fractions={"text": 2 / 3, "audio": 1 / 3})
    types = assign_types(tr, OMNI, m, np.random.default_rng(1), None)
    labels = {r.name: r for r in OMNI.request_types}
    audio_out = np.mean([labels[t].output.value == "audio" for t in types])
    video_in = np.mean(["video" in [x.value for x in labels[t].inputs] for t in types])
    assert audio_out == pytest.approx(1 / 3, abs=0.015)
    assert video_in == pytest.approx(0.5, abs=0.015)
    assert set(types) == set(OMNI.type_names)


def test_row_with_no_matching_type_is_an_error_naming_the_line() -> None:
    tr = trace(3, image_count=[1, 0, 1])  # the second row (line 3) has text only
    m = TraceMapping(output_fractions={"text": 1.0})
    with pytest.raises(TraceError) as info:
        assign_types(tr, OMNI, m, np.random.default_rng(0), None)
    text = str(info.value)
    assert "t.csv:3" in text and "no request type of 'qwen3-omni' has inputs ['text']" in text


def test_ambiguous_types_are_an_error() -> None:
    model = load_model("qwen-image")  # t2i-512 and t2i-1024 are both text -> image
    with pytest.raises(TraceError, match="match several request types"):
        assign_types(trace(2), model, TraceMapping(output_fractions={"image": 1.0}),
                     np.random.default_rng(0), None)


def test_type_column_and_unknown_values() -> None:
    tr = Trace("u.csv", "csv", np.arange(3.0), {}, {"type": ["t2t", "ti2t", "t2i"]}, np.array([2, 3, 4]))
    with pytest.raises(TraceError, match=r"u\.csv:4: type: 't2i' is not a request type"):
        assign_types(tr, VL, TraceMapping(type_column="type"), np.random.default_rng(0), None)
    ok = tr.take(slice(0, 2))
    assert assign_types(ok, VL, TraceMapping(type_column="type"), np.random.default_rng(0),
                        None).tolist() == ["t2t", "ti2t"]
    with pytest.raises(TraceError, match="no column 'kind'"):
        assign_types(ok, VL, TraceMapping(type_column="kind"), np.random.default_rng(0), None)


def test_a_mix_overrides_the_mapping() -> None:
    tr = trace(5000, image_count=[0] * 5000)
    types = assign_types(tr, VL, TraceMapping(output_fractions={"text": 1.0}),
                         np.random.default_rng(0), {"t2t": 0.25, "ti2t": 0.75})
    assert np.mean(types == "ti2t") == pytest.approx(0.75, abs=0.03)


def test_sizes_override_only_positive_values() -> None:
    tr = trace(3, prompt_tokens=[10, 0, float("nan")])
    given = given_sizes(tr, TraceMapping(sizes={"llm.prompt_tokens": "prompt_tokens"}))
    values = given["llm"]["prompt_tokens"]
    assert values[0] == 10 and np.isnan(values[1]) and np.isnan(values[2])
    with pytest.raises(TraceError, match="names field 'tokens'"):
        given_sizes(tr, TraceMapping(sizes={"llm.prompt_tokens": "tokens"}))
